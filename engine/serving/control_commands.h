// The control commands of docs/control-protocol.md, applied to one deployment on its loop
// thread: every command is validated in full before anything changes, answered with
// {"ok":true,…} or {"ok":false,"error":…}, and echoed on the control topic with its old and
// new value. Policy, micro-batch and placement changes take effect at the next safe point and
// are answered once applied.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
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
  void record_start(const nlohmann::json& c, const Reply& reply);
  void record_stop(const nlohmann::json& c, const Reply& reply);
  void record_start_ring(const nlohmann::json& c, const Reply& reply);
  void record_dump(const nlohmann::json& c, const Reply& reply);
  void set_workload(const nlohmann::json& c, const Reply& reply);
  // MegaScale-Infer plans for this deployment's model and hardware (engine/plan/live_plan.h).
  void plan(const nlohmann::json& c, const Reply& reply);
  void apply_plan(const nlohmann::json& c, const Reply& reply);

  // Switches to `spec` at the next safe point; replies and echoes once applied.
  // fields: more of the reply (findep's solver choice).
  void apply_policy(const nlohmann::json& c, const Reply& reply, const PolicySpec& spec,
                    nlohmann::json fields = nlohmann::json::object());
  void apply_placement(const nlohmann::json& c, const Reply& reply, Placement placement,
                       nlohmann::json old_value, nlohmann::json new_value);
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
};

}  // namespace sy
