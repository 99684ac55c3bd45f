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
  }
  void remove(RuntimeObserver* runtime, RequestObserver* requests) {
    std::erase(runtime_, runtime);
    std::erase(requests_, requests);
  }

  void on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index, std::int32_t group,
                    std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) override {
    for (auto* o : runtime_) o->on_execution(device, kind, block, index, group, tokens, start_ns, end_ns);
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
    for (auto* o : runtime_) o->on_stall(device, reason, start_ns, end_ns);
  }
  void on_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens,
                 std::int64_t at_ns) override {
    for (auto* o : runtime_) o->on_routed(block, expert, device, tokens, at_ns);
  }
  void on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t bytes, std::int64_t start_ns,
                   std::int64_t end_ns) override {
    for (auto* o : runtime_) o->on_transfer(src, dst, tokens, bytes, start_ns, end_ns);
  }
  void on_weight_fetch(std::int32_t device, std::int32_t source, std::int32_t block, std::int32_t expert,
                       std::int64_t bytes, std::int64_t start_ns, std::int64_t end_ns) override {
    for (auto* o : runtime_) o->on_weight_fetch(device, source, block, expert, bytes, start_ns, end_ns);
  }
  void on_queue_wait(std::int32_t device, const LayerId& queue, std::int64_t tokens, std::int64_t waited_ns,
                     std::int64_t at_ns) override {
    for (auto* o : runtime_) o->on_queue_wait(device, queue, tokens, waited_ns, at_ns);
  }
  void on_request(const RequestUpdate& update) override {
    for (auto* o : requests_) o->on_request(update);
  }

 private:
  std::vector<RuntimeObserver*> runtime_;
  std::vector<RequestObserver*> requests_;
};

}  // namespace sy
