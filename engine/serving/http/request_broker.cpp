#include "engine/serving/http/request_broker.h"

namespace sy::http {

bool RequestBroker::prefix_caching() const { return deployment_.coordinator().options().prefix_caching; }

std::int32_t RequestBroker::kv_page_size() const { return deployment_.options().page_size; }

std::int64_t RequestBroker::max_prompt_tokens() const {
  return deployment_.coordinator().options().max_waiting_tokens;
}

std::int64_t RequestBroker::max_waiting_requests() const {
  return deployment_.coordinator().options().max_waiting_requests;
}

RequestBroker::RequestBroker(Deployment& deployment) : deployment_(deployment) {
  deployment_.observers().add(nullptr, this);
}

RequestBroker::~RequestBroker() {
  close();
  deployment_.observers().remove(nullptr, this);
}

std::shared_ptr<RequestChannel> RequestBroker::submit(RequestSpec spec, std::shared_ptr<ChannelSignal> signal,
                                                      bool follows_accepted) {
  spec.id = next_id_.fetch_add(1);
  spec.external_id = std::to_string(spec.id);
  auto channel = std::make_shared<RequestChannel>(spec.id, std::move(signal));
  {
    std::lock_guard lock(mutex_);
    if (closed_ || (draining_ && !follows_accepted)) {
      channel->fail(ApiError::overloaded(503, "the server is shutting down", "shutting_down"));
      return channel;
    }
    open_.emplace(spec.id, channel);
  }
  deployment_.loop().post_external([this, spec = std::move(spec), channel]() mutable {
    EventLoop& loop = deployment_.loop();
    Coordinator& co = deployment_.coordinator();
    if (co.admission_paused()) {
      forget(channel->id());
      channel->fail(ApiError::overloaded(503, "admission is paused (control command pause); retry later", "paused"));
      return;
    }
    spec.arrival_ns = loop.now();
    co.submit(std::move(spec));
    // Posted after the arrival at the same time, so it runs after it: by then a full queue has
    // refused the request (and failed the channel, which ignores this).
    loop.post(loop.now(), [channel] { channel->accept(); });
  });
  return channel;
}

void RequestBroker::cancel(std::int64_t id) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
  }
  deployment_.loop().post_external([this, id] {
    // After the request's arrival (posted at an earlier or equal time, so run before this).
    deployment_.loop().post_now([this, id] { deployment_.coordinator().cancel(id); });
  });
}

void RequestBroker::drain() {
  std::lock_guard lock(mutex_);
  draining_ = true;
}

bool RequestBroker::draining() const {
  std::lock_guard lock(mutex_);
  return draining_;
}

std::size_t RequestBroker::open_requests() const {
  std::lock_guard lock(mutex_);
  return open_.size();
}

void RequestBroker::close() {
  std::unordered_map<std::int64_t, std::shared_ptr<RequestChannel>> open;
  {
    std::lock_guard lock(mutex_);
    draining_ = closed_ = true;
    open.swap(open_);
  }
  for (auto& [id, channel] : open)
    channel->fail(ApiError::overloaded(503, "the server is shutting down", "shutting_down"));
}

std::shared_ptr<RequestChannel> RequestBroker::find(std::int64_t id) {
  std::lock_guard lock(mutex_);
  const auto it = open_.find(id);
  return it == open_.end() ? nullptr : it->second;
}

void RequestBroker::forget(std::int64_t id) {
  std::lock_guard lock(mutex_);
  open_.erase(id);
}

void RequestBroker::on_request(const RequestUpdate& u) {
  if (u.phase != RequestPhase::Token && u.phase != RequestPhase::Finished && u.phase != RequestPhase::Rejected) return;
  const std::shared_ptr<RequestChannel> channel = find(u.id);
  if (!channel) return;
  switch (u.phase) {
    case RequestPhase::Token:
      if (u.tokens_out == 1 && u.tokens_cached > 0) channel->set_cached_tokens(u.tokens_cached);
      channel->push_token(u.token, u.logprobs);
      break;
    case RequestPhase::Finished:
      forget(u.id);
      channel->finish(u.finish_reason);
      break;
    case RequestPhase::Rejected:
      forget(u.id);
      if (u.reject_reason == RejectReason::Failed) {
        const auto& why = deployment_.coordinator().failure();
        channel->fail(ApiError::overloaded(
            503, "the deployment failed and dropped the request: " + (why ? *why : std::string("a process of it died")),
            "deployment_failed"));
      } else if (u.reject_reason == RejectReason::QueueFull) {
        channel->fail(ApiError::overloaded(
            429, "the admission queue is full (too many requests or prompt tokens waiting); retry later", "queue_full"));
      } else {
        ApiError e = ApiError::bad_field(
            "max_tokens", "the prompt and max_tokens (" + std::to_string(u.tokens_in) +
                              " prompt tokens) need more KV cache than any attention rank holds; lower max_tokens");
        e.code = "never_fits";
        channel->fail(std::move(e));
      }
      break;
    default: break;
  }
}

void RequestBroker::on_prompt_logprobs(std::int64_t id, const PromptLogprobs& logprobs) {
  if (const std::shared_ptr<RequestChannel> channel = find(id)) channel->push_prompt_logprobs(logprobs);
}

}  // namespace sy::http
