// Hands HTTP requests to a deployment serving on its event loop's thread, and its reports back:
// submit() posts the request to the loop (the one entry from other threads) and returns the
// channel that the broker, as a RequestObserver on the loop's thread, fills with the request's
// tokens. The HTTP threads never touch the coordinator.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "engine/serving/deployment.h"
#include "engine/serving/http/request_channel.h"

namespace sy::http {

class RequestBroker final : public RequestObserver {
 public:
  // Joins the deployment's observers; call before its loop runs (or between events).
  explicit RequestBroker(Deployment& deployment);
  ~RequestBroker() override;
  RequestBroker(const RequestBroker&) = delete;
  RequestBroker& operator=(const RequestBroker&) = delete;

  // Any thread. The spec's id and arrival time are the broker's to set. A draining or closed
  // broker answers 503 at once; a paused coordinator 503; a full queue 429. The channel notifies
  // `signal` too. `follows_accepted`: the request is part of an answer whose first request was
  // accepted (a choice held back to share its prompt's KV), which a drain lets finish: it is
  // refused only once the broker is closed.
  std::shared_ptr<RequestChannel> submit(RequestSpec spec, std::shared_ptr<ChannelSignal> signal = nullptr,
                                         bool follows_accepted = false);
  // Any thread: the client went away; frees the request's KV pages (Coordinator::cancel).
  void cancel(std::int64_t id);
  // Any thread: from now on every new request is answered 503 (shutting down) while the open
  // ones go on to their end: the first step of a graceful shutdown (serve --shutdown-timeout).
  void drain();
  // Any thread: from now on every request is answered 503 (shutting down), and every open one
  // fails with that. Call before the loop stops for good.
  void close();
  // Any thread: drain() or close() was called.
  bool draining() const;
  // Any thread: requests submitted and not yet finished, refused or failed.
  std::size_t open_requests() const;

  void on_request(const RequestUpdate& update) override;  // loop thread
  void on_prompt_logprobs(std::int64_t id, const PromptLogprobs& logprobs) override;  // loop thread
  // Whether the deployment shares cached prompt prefixes (answers then say how many prompt tokens came from the cache).
  bool prefix_caching() const;
  // Positions per KV page: with prefix caching, what a prompt must exceed for a later request
  // to share any of its pages (the page of its last token is always computed).
  std::int32_t kv_page_size() const;
  // The longest prompt the admission queue takes (--max-waiting-tokens): a longer one could
  // never be admitted, so it is a request error, not a full queue to retry.
  std::int64_t max_prompt_tokens() const;
  // The most requests the admission queue holds at once (--max-waiting-requests): an answer with
  // more choices than that could never have them all admitted.
  std::int64_t max_waiting_requests() const;

 private:
  std::shared_ptr<RequestChannel> find(std::int64_t id);
  void forget(std::int64_t id);

  Deployment& deployment_;
  mutable std::mutex mutex_;
  std::unordered_map<std::int64_t, std::shared_ptr<RequestChannel>> open_;
  bool draining_ = false;  // no new request
  bool closed_ = false;    // and none open
  std::atomic<std::int64_t> next_id_{0};
};

}  // namespace sy::http
