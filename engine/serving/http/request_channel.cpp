#include "engine/serving/http/request_channel.h"

namespace sy::http {

void RequestChannel::wake() {
  cv_.notify_all();
  if (signal_) signal_->notify();
}

void RequestChannel::accept() {
  {
    std::lock_guard lock(mutex_);
    accepted_ = true;
    news_ = true;
  }
  wake();
}

void RequestChannel::push_token(std::int32_t token, const kernels::TokenLogprobs* logprobs) {
  bool first = false;
  {
    std::lock_guard lock(mutex_);
    tokens_.push_back(token);
    if (logprobs) logprobs_.push_back(*logprobs);
    // A reader already woken and not yet back needs no second wake-up (tokens pile up
    // while it writes): one futex call per batch, not per token. The first token always wakes:
    // a handler holding back an answer's other choices until this prompt is prefilled waits
    // for it without taking the news (accept()'s is still pending then).
    first = !news_ || !first_token_;
    first_token_ = true;
    news_ = true;
  }
  if (first) wake();
}

void RequestChannel::set_cached_tokens(std::int32_t tokens) {
  std::lock_guard lock(mutex_);
  cached_tokens_ = tokens;  // news with the first token, which follows at once
}

void RequestChannel::push_prompt_logprobs(const PromptLogprobs& logprobs) {
  std::lock_guard lock(mutex_);
  // News with the first token, which the same execution sends right after.
  prompt_logprobs_.insert(prompt_logprobs_.end(), logprobs.tokens.begin(), logprobs.tokens.end());
}

void RequestChannel::finish(FinishReason reason) {
  {
    std::lock_guard lock(mutex_);
    finished_ = reason;
    news_ = true;
  }
  wake();
}

void RequestChannel::fail(ApiError error) {
  {
    std::lock_guard lock(mutex_);
    if (!error_ && finished_ == FinishReason::None) error_ = std::move(error);
    news_ = true;
  }
  wake();
}

RequestChannel::News RequestChannel::take(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [this] { return news_; });
  news_ = false;
  News n;
  n.accepted = accepted_;
  n.tokens.swap(tokens_);
  n.logprobs.swap(logprobs_);
  n.prompt_logprobs.swap(prompt_logprobs_);
  n.finished = finished_;
  n.error = error_;
  n.cached_tokens = cached_tokens_;
  return n;
}

RequestChannel::News RequestChannel::wait_accepted() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [this] { return accepted_ || error_.has_value() || finished_ != FinishReason::None; });
  News n;
  n.accepted = accepted_;
  n.finished = finished_;
  n.error = error_;
  return n;  // tokens stay for take()
}

bool RequestChannel::prefilled_or_ended() {
  std::lock_guard lock(mutex_);
  return first_token_ || error_.has_value() || finished_ != FinishReason::None;
}

}  // namespace sy::http
