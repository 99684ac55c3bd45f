#include "engine/serving/deployment.h"

#include "engine/runtime/virtual_event_loop.h"
#include "engine/runtime/wall_clock_event_loop.h"

namespace sy {

std::string_view clock_name(Clock clock) { return clock == Clock::Wall ? "wall" : "virtual"; }

std::unique_ptr<EventLoop> make_event_loop(Clock clock, double pace) {
  if (clock == Clock::Wall) return std::make_unique<WallClockEventLoop>();
  auto loop = std::make_unique<VirtualEventLoop>();
  loop->set_pace(pace);
  return loop;
}

Deployment::Deployment(Topology topology, DeploymentOptions options, std::int64_t bytes_per_row,
                       const Cluster::ExecutorFactory& make_executor, std::unique_ptr<EventLoop> loop)
    : loop_(loop ? std::move(loop) : make_event_loop(options.clock, options.pace)),
      coordinator_(*loop_, options.coordinator, &observers_),
      options_(std::move(options)) {
  metrics_.set_device_names(topology.device_names);
  observers_.add(&metrics_, &metrics_);
  cluster_ = std::make_unique<Cluster>(std::move(topology), *loop_, make_executor,
                                       options_.transport ? options_.transport
                                                          : LoopTransport::factory(bytes_per_row, options_.link),
                                       Cluster::KvShape{options_.kv_pages_per_rank, options_.page_size}, &observers_,
                                       coordinator_.hooks(), options_.process);
  cluster_->set_devices_per_node(options_.link.devices_per_node);
  coordinator_.attach(*cluster_, options_.policy);
}

Deployment::~Deployment() = default;

void Deployment::submit(std::vector<RequestSpec> requests) {
  for (auto& r : requests) coordinator_.submit(std::move(r));
}

std::int64_t Deployment::run() {
  // A failed deployment stops with work left on its devices: its requests have been rejected.
  events_run_ = loop_->run(
      [this] { return coordinator_.done() && (coordinator_.failed() || cluster_->quiescent()); });
  cluster_->flush_stalls();
  return loop_->now();
}

}  // namespace sy
