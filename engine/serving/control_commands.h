// The control commands of docs/control-protocol.md, applied to one deployment on its loop
// thread: every command is validated in full before anything changes, answered with
// {"ok":true,…} or {"ok":false,"error":…}, and echoed on the control topic with its old and
// new value. Policy, micro-batch and placement changes take effect at the next safe point and
// are answered once applied.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/plan/expert_rebalance.h"
#include "engine/runtime/placement.h"
#include "engine/runtime/policy_spec.h"
#include "engine/serving/deployment.h"
#include "engine/serving/telemetry_bridge.h"
#include "telemetry/recording_directory.h"
#include "telemetry/telemetry_hub.h"

namespace sy {

class ControlCommands {
 public:
  using Reply = std::function<void(const nlohmann::json&)>;
  struct Hooks {
    // set_workload: applies the command's {"rate", "skew", ...} and returns the new workload
    // object; unset where the workload is not generated live (the command is then refused).
    std::function<StatusOr<nlohmann::json>(const nlohmann::json& command)> set_workload;
  };

  // recordings: the only directory record_start may write to (null: record_start refused);
  // record_max: the size cap of those recordings in bytes (0: none).
  ControlCommands(Deployment& deployment, TelemetryBridge& bridge, telemetry::TelemetryHub& hub, Hooks hooks,
                  const telemetry::RecordingDirectory* recordings = nullptr, std::uint64_t record_max = 0);
  // Waits for a recording being stopped in the background.
  ~ControlCommands();
  ControlCommands(const ControlCommands&) = delete;
  ControlCommands& operator=(const ControlCommands&) = delete;

  // Every command name, for the control server's list of known commands.
  static const std::vector<std::string>& names();

  // On the loop thread. `command` is a JSON object with a string "cmd" (the control server has
  // checked that much); `reply` is called exactly once, now or when the change is applied.
  void handle(const nlohmann::json& command, Reply reply);

 private:
  void get_state(const nlohmann::json& c, const Reply& reply);
  void set_policy(const nlohmann::json& c, const Reply& reply);
  void set_microbatches(const nlohmann::json& c, const Reply& reply);
  void move_expert(const nlohmann::json& c, const Reply& reply, bool replicate);
  void set_placement(const nlohmann::json& c, const Reply& reply);
  void set_admission(const nlohmann::json& c, const Reply& reply, bool paused);
  void set_max_num_batched_tokens(const nlohmann::json& c, const Reply& reply);
  void record_start(const nlohmann::json& c, const Reply& reply);
  void record_stop(const nlohmann::json& c, const Reply& reply);
  void record_start_ring(const nlohmann::json& c, const Reply& reply);
  void record_dump(const nlohmann::json& c, const Reply& reply);
  void set_workload(const nlohmann::json& c, const Reply& reply);
  // MegaScale-Infer plans for this deployment's model and hardware (engine/plan/live_plan.h).
  void plan(const nlohmann::json& c, const Reply& reply);
  void apply_plan(const nlohmann::json& c, const Reply& reply);
  // Expert rebalancing (engine/plan/expert_rebalance.h): a proposal from the recent expert
  // load, previewed or applied through apply_placement; and its periodic form.
  void rebalance(const nlohmann::json& c, const Reply& reply);
  void set_rebalance(const nlohmann::json& c, const Reply& reply);

  // What a rebalance plans with: parsed from a command's algorithm, slots, min_load, windows.
  struct RebalanceRequest {
    RebalanceAlgorithm algorithm = RebalanceAlgorithm::Greedy;
    std::int32_t slots = 0;  // 0: one more than the most experts a device holds in a block
    double min_load = 0;
    std::int32_t windows = TelemetryBridge::kLoadHistory;
  };
  StatusOr<RebalanceRequest> parse_rebalance(const nlohmann::json& c) const;
  // Refuses `slots` beyond what a device's memory holds (never below what one holds now).
  Status check_slots(std::int32_t slots) const;
  // A proposal for the placement that will hold after any pending change.
  StatusOr<RebalanceProposal> propose(const RebalanceRequest& r, std::int32_t* slots_used, std::int64_t* window_ns) const;
  // Applies `proposal` (made against `current`) at the next safe point, as command `c`.
  void apply_proposal(const nlohmann::json& c, const Reply& reply, const RebalanceProposal& proposal,
                      const Placement& current, nlohmann::json fields);
  void rebalance_tick(std::uint64_t generation);

  // Switches to `spec` at the next safe point; replies and echoes once applied.
  // fields: more of the reply (findep's solver choice).
  void apply_policy(const nlohmann::json& c, const Reply& reply, const PolicySpec& spec,
                    nlohmann::json fields = nlohmann::json::object());
  // Changes the placement at the next safe point (set_placement, move_expert, rebalance all
  // come here); replies with `fields` and applied_at_ns, and echoes, once applied.
  void apply_placement(const nlohmann::json& c, const Reply& reply, Placement placement,
                       nlohmann::json old_value, nlohmann::json new_value,
                       nlohmann::json fields = nlohmann::json::object());
  // Answers ok with `fields` and echoes the change (old -> new).
  void succeed(const nlohmann::json& c, const Reply& reply, nlohmann::json old_value, nlohmann::json new_value,
               nlohmann::json fields = nlohmann::json::object());
  void fail(const nlohmann::json& c, const Reply& reply, const std::string& error);

  Deployment& d_;
  TelemetryBridge& bridge_;
  telemetry::TelemetryHub& hub_;
  Hooks hooks_;
  const telemetry::RecordingDirectory* recordings_;
  std::uint64_t record_max_;
  // Shared with callbacks that may outlive this object (changes applied later): false once gone.
  std::shared_ptr<bool> alive_;
  std::thread stopper_;  // record_stop builds indexes off the loop thread
  // The last previewed proposal, which `rebalance` with "proposal": id applies exactly as shown
  // while the placement it was made against still holds.
  struct Previewed {
    std::int64_t id = 0;
    Placement base;
    RebalanceProposal proposal;
  };
  std::optional<Previewed> previewed_;
  std::int64_t next_proposal_id_ = 1;
  std::int64_t applied_proposal_id_ = 0;  // the last preview applied (0: none), for its refusal
  // Periodic rebalancing (set_rebalance); a new setting bumps the generation so older ticks stop.
  struct Periodic {
    RebalanceRequest request;
    std::int64_t interval_ns = 0;
    double threshold = 1;
    double min_gain = 0;
  };
  std::optional<Periodic> periodic_;
  // Expert replicas per block one device's memory holds (hardware profile); 0: unknown.
  std::int32_t memory_slots_ = 0;
  std::uint64_t periodic_generation_ = 0;
};

}  // namespace sy
