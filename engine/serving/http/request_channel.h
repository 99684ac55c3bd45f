// One HTTP request's view of its generation: the event loop's thread pushes what the
// coordinator reports (accepted, tokens, finished, refused) and the HTTP handler's thread takes
// it, waiting on a condition variable. Nothing else crosses between the two threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/serving/http/api_error.h"
#include "engine/serving/http/channel_signal.h"
#include "engine/serving/request_observer.h"

namespace sy::http {

class RequestChannel {
 public:
  // `signal`, when given, is notified with every news too (a handler following several channels).
  explicit RequestChannel(std::int64_t id, std::shared_ptr<ChannelSignal> signal = nullptr)
      : id_(id), signal_(std::move(signal)) {}
  std::int64_t id() const { return id_; }

  // Loop thread.
  void accept();  // the admission queue took the request
  // logprobs: the token's, when the request asked for them (else null).
  void push_token(std::int32_t token, const kernels::TokenLogprobs* logprobs = nullptr);
  // Prompt tokens whose KV a prefix cache supplied (before the first token).
  void set_cached_tokens(std::int32_t tokens);
  // A run of the prompt's log-probabilities, when the request asked (before its first token).
  void push_prompt_logprobs(const PromptLogprobs& logprobs);
  void finish(FinishReason reason);
  void fail(ApiError error);  // refused (queue full, paused, shutting down, never fits)

  // HTTP thread. What happened since the last take(), after waiting up to `timeout` for news.
  struct News {
    bool accepted = false;
    std::vector<std::int32_t> tokens;  // new since the last take
    // One per token when the request asked for log-probabilities (the backend has logits), else empty.
    std::vector<kernels::TokenLogprobs> logprobs;
    // The prompt's log-probabilities new since the last take, of consecutive positions from
    // the first not taken yet (position 1 first), when the request asked for them.
    std::vector<kernels::TokenLogprobs> prompt_logprobs;
    FinishReason finished = FinishReason::None;
    std::optional<ApiError> error;
    std::int32_t cached_tokens = 0;
    bool done() const { return finished != FinishReason::None || error.has_value(); }
  };
  News take(std::chrono::milliseconds timeout);
  // Waits until the request is accepted or refused (the queue answers at once).
  News wait_accepted();
  // Whether its first token came (its prompt is prefilled, and with prefix caching its full
  // pages are indexed: the coordinator indexes them before it reports the token) or it ended;
  // the channel's signal is notified when it turns true. Takes nothing.
  bool prefilled_or_ended();

 private:
  // Both condition variables are notified outside the lock.
  void wake();

  const std::int64_t id_;
  const std::shared_ptr<ChannelSignal> signal_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool accepted_ = false;
  bool news_ = false;
  bool first_token_ = false;  // stays, unlike tokens_, which take() empties
  std::vector<std::int32_t> tokens_;
  std::vector<kernels::TokenLogprobs> logprobs_;
  std::vector<kernels::TokenLogprobs> prompt_logprobs_;
  FinishReason finished_ = FinishReason::None;
  std::optional<ApiError> error_;
  std::int32_t cached_tokens_ = 0;
};

}  // namespace sy::http
