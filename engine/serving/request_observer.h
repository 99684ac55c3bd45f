// What the coordinator reports about each request as it moves through its lifecycle. Metrics
// and telemetry implement it; the coordinator depends on neither.
#pragma once

#include <cstdint>
#include <span>

#include "engine/runtime/prompt_logprobs.h"
#include "engine/runtime/token_batch.h"
#include "kernels/cpu/logprobs.h"

namespace sy {

enum class RequestPhase : std::uint8_t { Arrival, Admitted, Token, Finished, Rejected };

// Why a request was rejected (a metric label; the message names the limit).
// Failed: the deployment could not go on (a process of it died) and dropped the request.
enum class RejectReason : std::uint8_t { None, NeverFits, QueueFull, Failed };
const char* reject_reason_name(RejectReason reason);

// Why a request finished: its token budget, a stop token (eos or one of its own), or a
// cancellation (a client that went away); OpenAI's finish_reason is "length" or "stop".
enum class FinishReason : std::uint8_t { None, Length, Stop, Cancelled };
const char* finish_reason_name(FinishReason reason);

struct RequestUpdate {
  std::int64_t id = 0;       // the request's id (RequestSpec::id)
  std::int64_t t_ns = 0;
  RequestPhase phase = RequestPhase::Arrival;
  std::int32_t rank = -1;        // attention DP rank once admitted
  std::int32_t tokens_in = 0;    // prompt length
  std::int32_t tokens_out = 0;   // tokens produced so far (Token: including this one)
  std::int32_t tokens_cached = 0;  // from Admitted on: prompt positions whose KV a prefix cache supplied
  RejectReason reject_reason = RejectReason::None;  // Rejected only
  std::int32_t token = -1;                          // Token only: the token sampled
  // Token only, when the request asked (SamplingSpec::logprobs): valid during the call.
  const kernels::TokenLogprobs* logprobs = nullptr;
  FinishReason finish_reason = FinishReason::None;  // Finished only
};

class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  virtual void on_request(const RequestUpdate& update) = 0;
  // A run of the prompt's log-probabilities of request `id` (RequestSpec::id) that asked for
  // them (SamplingSpec::prompt_logprobs), before the Token update of the same execution; valid
  // during the call. logprobs.request is the engine's index of the request, not `id`.
  virtual void on_prompt_logprobs(std::int64_t /*id*/, const PromptLogprobs& /*logprobs*/) {}
  // A pass of attention rank `rank` enters block 0: its rows, decodes and prompt chunks
  // (CoordinatorOptions::max_num_batched_tokens bounds them), valid during the call.
  virtual void on_pass(std::int32_t /*rank*/, std::span<const TokenRow> /*rows*/) {}
};

}  // namespace sy
