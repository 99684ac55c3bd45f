#include "engine/serving/workload.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "base/json_parse.h"

namespace sy {
namespace {

// Guards against a typo (rate 1e9) turning into an out-of-memory instead of a message.
constexpr double kMaxExpectedRequests = 1e7;

// Uniform in [0, 1) from the top 53 bits of one draw: exact, so identical everywhere.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Uniform integer in [lo, hi], unbiased: draws below 2^64 mod range are rejected, so the
// accepted ones cover every residue equally often.
std::int64_t uniform_int(std::mt19937_64& rng, std::int64_t lo, std::int64_t hi) {
  const auto range = static_cast<std::uint64_t>(hi - lo) + 1;
  const std::uint64_t threshold = (std::uint64_t{0} - range) % range;
  std::uint64_t x = rng();
  while (x < threshold) x = rng();
  return lo + static_cast<std::int64_t>(x % range);
}

// Exponential with the given rate by inversion; 1 - u lies in (0, 1] and is exact.
double exponential(std::mt19937_64& rng, double rate) { return -std::log(1.0 - uniform01(rng)) / rate; }

// The parser saw one line: "at line 1, column 5" -> "at column 5" (the line is ours).
std::string without_line(std::string m) {
  if (auto p = m.find("at line 1, column"); p != std::string::npos) m.replace(p, 17, "at column");
  return m;
}

}  // namespace

LengthRange length_range(LengthClass c) {
  switch (c) {
    case LengthClass::Short: return {30, 70, 70, 130};
    case LengthClass::Medium: return {50, 150, 50, 250};
    case LengthClass::Reasonable: return {100, 300, 100, 500};
  }
  return {0, 0, 0, 0};
}

std::string length_class_name(LengthClass c) {
  switch (c) {
    case LengthClass::Short: return "short";
    case LengthClass::Medium: return "medium";
    case LengthClass::Reasonable: return "reasonable";
  }
  return "?";
}

StatusOr<LengthClass> parse_length_class(const std::string& text) {
  for (LengthClass c : {LengthClass::Short, LengthClass::Medium, LengthClass::Reasonable})
    if (text == length_class_name(c)) return c;
  return Status::Error("unknown length class '" + text + "' (expected short, medium or reasonable)");
}

Status validate_workload(const WorkloadSpec& spec) {
  if (!(spec.rate_per_s > 0.0) || !std::isfinite(spec.rate_per_s))
    return Status::Error("workload rate must be a positive number of requests per second, got " +
                         std::to_string(spec.rate_per_s));
  if (!(spec.duration_s >= 0.0) || !std::isfinite(spec.duration_s))
    return Status::Error("workload duration must be >= 0 seconds, got " + std::to_string(spec.duration_s));
  if (spec.rate_per_s * spec.duration_s > kMaxExpectedRequests)
    return Status::Error("workload rate x duration asks for about " + std::to_string(spec.rate_per_s * spec.duration_s) +
                         " requests, more than the 1e7 this generator makes");
  if (spec.vocab_size <= 0)
    return Status::Error("workload vocab_size must be > 0, got " + std::to_string(spec.vocab_size));
  if (spec.shared_prefix < 0 || spec.shared_prefix > kMaxSharedPrefix)
    return Status::Error("workload shared prefix must be 0 to " + std::to_string(kMaxSharedPrefix) + " tokens, got " +
                         std::to_string(spec.shared_prefix));
  return Status::Ok();
}

std::vector<RequestSpec> generate_workload(const WorkloadSpec& spec) {
  std::vector<RequestSpec> out;
  if (!validate_workload(spec).ok()) return out;
  const LengthRange lengths = length_range(spec.length_class);
  std::mt19937_64 rng(spec.seed);
  // The shared prefix has a generator of its own: the draws of the requests stay what they were.
  std::vector<std::int32_t> prefix(static_cast<std::size_t>(spec.shared_prefix));
  std::mt19937_64 prefix_rng(0x5157E4D9A11Eull);
  for (auto& token : prefix) token = static_cast<std::int32_t>(uniform_int(prefix_rng, 0, spec.vocab_size - 1));
  double t = 0.0;
  // The draw order (gap, input length, output length, tokens) is part of the contract: the
  // same seed must give the same workload across versions too.
  for (;;) {
    t += exponential(rng, spec.rate_per_s);
    if (!(t < spec.duration_s)) break;
    RequestSpec r;
    r.id = static_cast<std::int64_t>(out.size());
    r.external_id = std::to_string(r.id);
    r.arrival_ns = static_cast<std::int64_t>(t * 1e9);
    const auto input = static_cast<std::int32_t>(uniform_int(rng, lengths.input_min, lengths.input_max));
    r.max_new_tokens = static_cast<std::int32_t>(uniform_int(rng, lengths.output_min, lengths.output_max));
    r.prompt = prefix;
    r.prompt.resize(prefix.size() + static_cast<std::size_t>(input));
    for (std::size_t i = prefix.size(); i < r.prompt.size(); ++i)
      r.prompt[i] = static_cast<std::int32_t>(uniform_int(rng, 0, spec.vocab_size - 1));
    out.push_back(std::move(r));
  }
  return out;
}

StatusOr<std::vector<RequestSpec>> read_prompts_jsonl(const std::filesystem::path& path, std::int32_t vocab_size) {
  const std::string file = path.string();
  if (vocab_size <= 0) return Status::Error(file + ": vocabulary size must be > 0, got " + std::to_string(vocab_size));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open prompts file " + file + ": " + std::strerror(errno));
  return parse_prompts_jsonl(in, file, vocab_size);
}

StatusOr<std::vector<RequestSpec>> parse_prompts_jsonl(std::istream& in, const std::string& file,
                                                       std::int32_t vocab_size) {
  if (vocab_size <= 0) return Status::Error(file + ": vocabulary size must be > 0, got " + std::to_string(vocab_size));
  std::vector<RequestSpec> out;
  std::map<std::string, std::int64_t> first_line;  // external id -> line
  std::string line;
  std::int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (std::all_of(line.begin(), line.end(), [](char c) { return c == ' ' || c == '\t'; })) continue;
    const std::string at = file + ":" + std::to_string(line_no) + ": ";
    auto parsed = parse_json(line);
    if (!parsed.ok()) return Status::Error(at + "bad JSON: " + without_line(parsed.status().message()));
    const nlohmann::json j = std::move(parsed).value();
    if (!j.is_object()) return Status::Error(at + "expected a JSON object {\"id\", \"tokens\", \"max_new_tokens\"}");

    RequestSpec r;
    r.id = static_cast<std::int64_t>(out.size());
    const auto id = j.find("id");
    if (id == j.end()) return Status::Error(at + "missing field 'id'");
    if (!id->is_number_integer() && !id->is_string())
      return Status::Error(at + "id must be an integer or a string, got " + id->dump());
    r.external_id = id->dump();
    if (auto it = first_line.find(r.external_id); it != first_line.end())
      return Status::Error(at + "duplicate id " + r.external_id + " (first on line " + std::to_string(it->second) + ")");
    first_line.emplace(r.external_id, line_no);

    const auto tokens = j.find("tokens");
    if (tokens == j.end()) return Status::Error(at + "missing field 'tokens'");
    if (!tokens->is_array()) return Status::Error(at + "tokens must be an array of token ids, got " + tokens->dump());
    if (tokens->empty()) return Status::Error(at + "tokens is empty (a prompt needs at least one token)");
    for (std::size_t i = 0; i < tokens->size(); ++i) {
      const auto& t = (*tokens)[i];
      const bool in_vocab = t.is_number_integer() &&
                            (t.is_number_unsigned() ? t.get<std::uint64_t>() < static_cast<std::uint64_t>(vocab_size)
                                                    : t.get<std::int64_t>() >= 0 && t.get<std::int64_t>() < vocab_size);
      if (!in_vocab)
        return Status::Error(at + "token " + t.dump() + " at position " + std::to_string(i) +
                             " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
      r.prompt.push_back(static_cast<std::int32_t>(t.get<std::int64_t>()));
    }

    const auto max_new = j.find("max_new_tokens");
    if (max_new == j.end()) return Status::Error(at + "missing field 'max_new_tokens'");
    constexpr std::int64_t kMaxNew = std::numeric_limits<std::int32_t>::max();
    const bool ok = max_new->is_number_integer() &&
                    (max_new->is_number_unsigned() ? max_new->get<std::uint64_t>() <= static_cast<std::uint64_t>(kMaxNew)
                                                   : max_new->get<std::int64_t>() >= 0);
    if (!ok) return Status::Error(at + "max_new_tokens must be an integer in [0, " + std::to_string(kMaxNew) + "], got " +
                                  max_new->dump());
    r.max_new_tokens = static_cast<std::int32_t>(max_new->get<std::int64_t>());
    out.push_back(std::move(r));
  }
  if (in.bad()) return Status::Error("cannot read prompts file " + file + ": " + std::strerror(errno));
  return out;
}

Status write_outputs_jsonl(const std::filesystem::path& path,
                           const std::vector<std::pair<std::string, std::vector<std::int32_t>>>& outputs) {
  const std::string file = path.string();
  std::string text;
  for (const auto& [external_id, tokens] : outputs) {
    nlohmann::json id = nlohmann::json::parse(external_id, nullptr, /*allow_exceptions=*/false);
    if (!id.is_number_integer() && !id.is_string()) id = external_id;
    nlohmann::json line = {{"id", std::move(id)}, {"output", tokens}};
    text += line.dump();
    text += '\n';
  }
  // Same directory as the target, so the rename cannot cross file systems.
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return Status::Error("cannot write " + file + ": " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                       ::fsync(::fileno(f)) == 0;
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return Status::Error("cannot write " + file + ": " + std::strerror(written ? errno : write_errno));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    return Status::Error("cannot write " + file + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace sy
