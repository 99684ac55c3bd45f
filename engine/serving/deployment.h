// A whole deployment on one event loop: the workers of a topology wired by the runtime to a
// transport, a coordinator and metrics. Backends differ only in the executors they plug in
// (cpu: real math, sim: a cost model) and the clock they run on, never in worker, queue or
// policy code.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "engine/sim/cost_model.h"
#include "engine/sim/findep_deployment.h"
#include "engine/runtime/cluster.h"
#include "engine/runtime/event_loop.h"
#include "engine/runtime/loop_transport.h"
#include "engine/runtime/topology.h"
#include "engine/serving/coordinator.h"
#include "engine/serving/metrics.h"
#include "engine/serving/observer_fanout.h"
#include "engine/serving/workload.h"

namespace sy {

class RoutingTrace;
class SkewRouting;

// Which clock a deployment runs on. Virtual: executions last their modelled or measured time
// on virtual clocks, one after another on the loop's thread; deterministic, and the only
// clock of the sim backend. Wall: every device runs on a thread (or stream) of its own,
// concurrently, and all times are wall-clock times.
enum class Clock : std::uint8_t { Virtual, Wall };
std::string_view clock_name(Clock clock);

struct DeploymentOptions {
  Clock clock = Clock::Virtual;
  // Virtual clock only: virtual seconds per wall second (1: in step with the wall clock, for
  // live views of a simulated cluster); 0 runs as fast as the handlers allow.
  double pace = 0;
  RuntimePolicy policy;
  CoordinatorOptions coordinator;
  LinkModel link;
  std::shared_ptr<const CostModel> cost_model;  // cpu: null means executions take their measured time
  std::optional<double> skew_lambda;            // routing-skew override exp(-λ·rank)
  std::uint64_t skew_seed = 0;
  // Made from skew_lambda by the deployment (sim: always, λ = 0 when unset); shared by its
  // executors, so that the skew can change while serving.
  std::shared_ptr<SkewRouting> skew_routing;
  std::shared_ptr<const RoutingTrace> routing_trace;  // sim: replay a recorded routing
  // What findep's solver plans with when asked to choose the configuration (set_policy with
  // expert_chunks "auto", --findep-config auto): set by the CLI's backend; null: refused.
  std::shared_ptr<const FindepCostBasis> findep_costs;
  std::int32_t kv_pages_per_rank = 4096;
  std::int32_t page_size = 16;
  // Several processes (engine/dist): the transport between them, and which process this is
  // (only the devices topology.device_process gives it run here). Empty: LoopTransport over
  // `link`, every device in this process.
  TransportFactory transport;
  std::int32_t process = 0;
};

// A WallClockEventLoop, or a VirtualEventLoop at `pace`.
std::unique_ptr<EventLoop> make_event_loop(Clock clock, double pace = 0);

class Deployment {
 public:
  // `loop` is the event loop it runs on (made for options.clock by make_event_loop unless
  // the caller brings its own).
  Deployment(Topology topology, DeploymentOptions options, std::int64_t bytes_per_row,
             const Cluster::ExecutorFactory& make_executor, std::unique_ptr<EventLoop> loop = nullptr);
  virtual ~Deployment();
  Deployment(const Deployment&) = delete;
  Deployment& operator=(const Deployment&) = delete;

  void submit(std::vector<RequestSpec> requests);
  // Runs until every submitted request has finished or been rejected; returns the end time.
  std::int64_t run();
  // Events the loop ran in the last run() (simulator speed is events per wall second).
  std::int64_t events_run() const { return events_run_; }

  EventLoop& loop() { return *loop_; }
  Coordinator& coordinator() { return coordinator_; }
  Cluster& cluster() { return *cluster_; }
  MetricsCollector& metrics() { return metrics_; }
  // Every runtime and request report also goes to these (telemetry); call between events.
  ObserverFanout& observers() { return observers_; }
  const DeploymentOptions& options() const { return options_; }

 private:
  std::unique_ptr<EventLoop> loop_;  // before everything that posts to it
  MetricsCollector metrics_;
  ObserverFanout observers_;
  Coordinator coordinator_;
  DeploymentOptions options_;
  std::unique_ptr<Cluster> cluster_;
  std::int64_t events_run_ = 0;
};

}  // namespace sy
