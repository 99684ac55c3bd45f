// Requests to serve: AMoE's synthetic workloads (Poisson arrivals, uniform lengths per class),
// and the JSONL prompt/output files of `switchyard generate --prompts IN.jsonl --out OUT.jsonl`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/runtime/sequence.h"
#include "engine/structured/guide.h"

namespace sy {

// AMoE §5 request-length classes; lengths are uniform integers over inclusive ranges:
//   Short       input 30-70,   output 70-130
//   Medium      input 50-150,  output 50-250
//   Reasonable  input 100-300, output 100-500
enum class LengthClass { Short, Medium, Reasonable };

struct LengthRange {
  std::int32_t input_min, input_max, output_min, output_max;
};
LengthRange length_range(LengthClass c);
std::string length_class_name(LengthClass c);  // "short" | "medium" | "reasonable"
// Accepts the names above; the message names the text that is none of them.
StatusOr<LengthClass> parse_length_class(const std::string& text);

struct WorkloadSpec {
  LengthClass length_class = LengthClass::Short;
  double rate_per_s = 1.0;   // mean request arrivals per second (> 0)
  double duration_s = 1.0;   // arrivals fall in [0, duration) (>= 0)
  std::uint64_t seed = 0;
  std::int32_t vocab_size = 0;  // prompt tokens are uniform in [0, vocab_size) (> 0)
  // Every prompt begins with the same this many tokens (a system prompt), before the ones the
  // class draws: what prefix caching serves. The prefix is fixed (the same for every seed and
  // every run); 0 leaves the workload as it was.
  std::int32_t shared_prefix = 0;
};

// The most shared-prefix tokens a workload takes.
inline constexpr std::int32_t kMaxSharedPrefix = 1 << 20;

// The message names the bad field.
Status validate_workload(const WorkloadSpec& spec);

struct RequestSpec {
  std::int64_t id = 0;             // dense internal id: 0, 1, 2, ... in arrival/file order
  // The id as the client wrote it, as JSON text: `42` for an integer id, `"a-7"` (quotes
  // included) for a string id, so that outputs carry it back with its original type.
  // Generated workloads use the decimal id.
  std::string external_id;
  std::int64_t arrival_ns = 0;
  std::vector<std::int32_t> prompt;
  std::int32_t max_new_tokens = 0;
  // A client's own sampling (HTTP requests); unset: the coordinator's options decide.
  std::optional<SamplingSpec> sampling;
  std::vector<kernels::TokenBias> logit_bias;  // OpenAI's logit_bias, by token
  // The request also finishes after emitting any of these (besides the coordinator's eos).
  std::vector<std::int32_t> stop_token_ids;
  bool ignore_eos = false;  // do not finish at the coordinator's eos_token_id
  // Guided decoding (structured output): the grammar the answer follows; null: none.
  std::shared_ptr<const structured::GuideSpec> guide{};
};

// Poisson arrivals (exponential inter-arrival times of mean 1/rate) over [0, duration), each
// with input and output lengths drawn uniformly from the class's ranges and uniform random
// prompt tokens. A pure function of the spec: the same seed gives the same requests with any
// standard library (raw std::mt19937_64 draws with our own transforms; the only libm call is
// std::log, correctly rounded in practice). Returns no requests for an invalid spec.
std::vector<RequestSpec> generate_workload(const WorkloadSpec& spec);

// Reads one request per line: {"id": <integer or string>, "tokens": [ids], "max_new_tokens": N}.
// Other keys are ignored. Blank lines are skipped. Requests all arrive at time 0 and get ids in
// line order. Errors name the file, the line and the problem: unreadable file, bad JSON, a
// missing or mistyped field, an empty prompt, a token outside [0, vocab_size), a negative
// max_new_tokens, a duplicate id.
StatusOr<std::vector<RequestSpec>> read_prompts_jsonl(const std::filesystem::path& path, std::int32_t vocab_size);
// The same from a stream; `file` names it in errors.
StatusOr<std::vector<RequestSpec>> parse_prompts_jsonl(std::istream& in, const std::string& file,
                                                       std::int32_t vocab_size);

// Writes {"id": <id>, "output": [ids]} per line, ids taken from RequestSpec::external_id (JSON
// text; anything that is not a JSON integer or string is written as a string). Written to a
// temporary file beside `path` and renamed over it, so readers never see half a file.
Status write_outputs_jsonl(const std::filesystem::path& path,
                           const std::vector<std::pair<std::string, std::vector<std::int32_t>>>& outputs);

}  // namespace sy
