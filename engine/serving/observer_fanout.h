// Hands every runtime and request report to several observers (metrics, telemetry), so the
// runtime and the coordinator keep a single observer pointer each.
#pragma once

#include <algorithm>
#include <vector>

#include "engine/runtime/runtime_observer.h"
#include "engine/serving/request_observer.h"

namespace sy {

class ObserverFanout final : public RuntimeObserver, public RequestObserver {
 public:
  // Either may be null. Not while the loop is running an event.
  void add(RuntimeObserver* runtime, RequestObserver* requests) {
    if (runtime) runtime_.push_back(runtime);
    if (requests) requests_.push_back(requests);
    sole_ = runtime_.size() == 1 ? runtime_.front() : nullptr;
  }
  void remove(RuntimeObserver* runtime, RequestObserver* requests) {
    std::erase(runtime_, runtime);
    std::erase(requests_, requests);
    sole_ = runtime_.size() == 1 ? runtime_.front() : nullptr;
  }

  void on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index, std::int32_t group,
                    std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) override {
    if (sole_) return sole_->on_execution(device, kind, block, index, group, tokens, start_ns, end_ns);
    fan(&RuntimeObserver::on_execution, device, kind, block, index, group, tokens, start_ns, end_ns);
  }
  void on_merge(std::int32_t device, std::int32_t block, std::int64_t tokens, std::int64_t start_ns,
                std::int64_t end_ns) override {
    for (auto* o : runtime_) o->on_merge(device, block, tokens, start_ns, end_ns);
  }
  void on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group, std::int64_t tokens,
                        std::int64_t start_ns, std::int64_t end_ns) override {
    for (auto* o : runtime_) o->on_shared_expert(device, block, group, tokens, start_ns, end_ns);
  }
  void on_stall(std::int32_t device, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) override {
    if (sole_) return sole_->on_stall(device, reason, start_ns, end_ns);
    fan(&RuntimeObserver::on_stall, device, reason, start_ns, end_ns);
  }
  void on_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens,
                 std::int64_t at_ns) override {
    if (sole_) return sole_->on_routed(block, expert, device, tokens, at_ns);
    fan(&RuntimeObserver::on_routed, block, expert, device, tokens, at_ns);
  }
  void on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t bytes, std::int64_t start_ns,
                   std::int64_t end_ns) override {
    if (sole_) return sole_->on_transfer(src, dst, tokens, bytes, start_ns, end_ns);
    fan(&RuntimeObserver::on_transfer, src, dst, tokens, bytes, start_ns, end_ns);
  }
  void on_weight_fetch(std::int32_t device, std::int32_t source, std::int32_t block, std::int32_t expert,
                       std::int64_t bytes, std::int64_t start_ns, std::int64_t end_ns) override {
    for (auto* o : runtime_) o->on_weight_fetch(device, source, block, expert, bytes, start_ns, end_ns);
  }
  void on_queue_wait(std::int32_t device, const LayerId& queue, std::int64_t tokens, std::int64_t waited_ns,
                     std::int64_t at_ns) override {
    if (sole_) return sole_->on_queue_wait(device, queue, tokens, waited_ns, at_ns);
    fan(&RuntimeObserver::on_queue_wait, device, queue, tokens, waited_ns, at_ns);
  }
  void on_request(const RequestUpdate& update) override {
    for (auto* o : requests_) o->on_request(update);
  }
  void on_prompt_logprobs(std::int64_t id, const PromptLogprobs& logprobs) override {
    for (auto* o : requests_) o->on_prompt_logprobs(id, logprobs);
  }
  void on_pass(std::int32_t rank, std::span<const TokenRow> rows) override {
    for (auto* o : requests_) o->on_pass(rank, rows);
  }

 private:
  // Out of line, so that the sole observer's path above needs no frame of its own.
  template <class... Params, class... Args>
  [[gnu::noinline]] void fan(void (RuntimeObserver::*report)(Params...), Args... args) {
    for (auto* o : runtime_) (o->*report)(args...);
  }

  std::vector<RuntimeObserver*> runtime_;
  // The one runtime observer when there is exactly one (metrics, without telemetry): the
  // reports that come per shipment and per execution forward to it as a tail call, without
  // the loop's frame (the simulator makes over a million such reports per cluster second).
  RuntimeObserver* sole_ = nullptr;
  std::vector<RequestObserver*> requests_;
};

}  // namespace sy
