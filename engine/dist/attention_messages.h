// The messages that let an attention device run on another rank than the coordinator
// (docs/wire-format.md, types 27–30 and 32): rank 0 sends each request's block table and
// sampling ahead of its rows and says when it is released; the device sends its sampled tokens
// back, and the prompt log-probabilities of the requests that ask for them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/dist/wire_format.h"
#include "engine/runtime/prompt_logprobs.h"
#include "engine/runtime/sequence.h"
#include "engine/structured/grammar.h"
#include "kernels/cpu/logprobs.h"

namespace sy::dist {

struct SequenceOpen {
  std::int32_t rank = 0;  // the DP (attention) rank
  std::int64_t request = 0;
  std::vector<std::int32_t> pages;  // its block table
  SamplingSpec sampling;
  // Under a repetition penalty or with prompt log-probabilities only (SequenceContext::prompt).
  std::vector<std::int32_t> prompt;
  std::vector<kernels::TokenBias> logit_bias;
  // Always (since version 8): the device tells a chunk of the prompt that is not its last, which
  // samples nothing, from the final one (KvBlockManager::mid_prompt).
  std::int32_t prompt_length = 0;
  // Since version 9: a guided request's grammar (null: none), masked against the vocabulary
  // rank 0 sent the process before (GuideVocabulary, guide_messages.h).
  std::shared_ptr<const structured::Grammar> grammar;
  bool operator==(const SequenceOpen& o) const;
};

struct SequenceClose {
  std::int32_t rank = 0;
  std::int64_t request = 0;
  bool operator==(const SequenceClose&) const = default;
};

struct Sampled {
  std::int64_t request = 0;
  std::int32_t token = 0;  // Worker::kNoToken (−1): the pass held a non-final chunk of the prompt
  std::optional<kernels::TokenLogprobs> logprobs;  // only when the request asked
  bool operator==(const Sampled& o) const;
};

// A run of a request's prompt log-probabilities (PromptLogprobs), before its Sampled.
struct PromptScores {
  PromptLogprobs logprobs;
  bool operator==(const PromptScores& o) const;
};

struct GroupSampled {
  std::int32_t rank = 0;
  std::int32_t group = 0;
  bool operator==(const GroupSampled&) const = default;
};

// Each encoder writes the whole message, type byte first; each decoder reads the body after the
// type byte and refuses a truncated message or a field out of range (negative pages, more than
// kernels::kMaxTopLogprobs alternatives, a sampling spec no request could carry).
std::string encode(const SequenceOpen& m);
std::string encode(const SequenceClose& m);
std::string encode(const Sampled& m);
std::string encode(const GroupSampled& m);
std::string encode(const PromptScores& m);
Status decode(ByteReader& r, SequenceOpen& m);
Status decode(ByteReader& r, SequenceClose& m);
Status decode(ByteReader& r, Sampled& m);
Status decode(ByteReader& r, GroupSampled& m);
Status decode(ByteReader& r, PromptScores& m);

}  // namespace sy::dist
