#include "engine/serving/deployment.h"

namespace sy {

Deployment::Deployment(Topology topology, DeploymentOptions options, std::int64_t bytes_per_row,
                       const Cluster::ExecutorFactory& make_executor)
    : coordinator_(loop_, options.coordinator, &observers_), options_(std::move(options)) {
  metrics_.set_device_names(topology.device_names);
  observers_.add(&metrics_, &metrics_);
  cluster_ = std::make_unique<Cluster>(std::move(topology), loop_, make_executor, options_.link, bytes_per_row,
                                       &observers_, coordinator_.hooks());
  coordinator_.attach(*cluster_, options_.policy);
}

Deployment::~Deployment() = default;

void Deployment::submit(std::vector<RequestSpec> requests) {
  for (auto& r : requests) coordinator_.submit(std::move(r));
}

std::int64_t Deployment::run() {
  loop_.run([this] { return coordinator_.done() && cluster_->quiescent(); });
  cluster_->flush_stalls();
  return loop_.now();
}

}  // namespace sy
