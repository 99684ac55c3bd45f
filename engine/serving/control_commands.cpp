#include "engine/serving/control_commands.h"

#include <algorithm>

#include "engine/plan/live_plan.h"
#include "engine/plan/plan_verify.h"
#include "engine/runtime/runtime_policy.h"

namespace sy {
namespace {

using nlohmann::json;

std::string cmd_of(const json& c) { return c.at("cmd").get<std::string>(); }

// Refuses keys a command does not take, so that a typo ("blok") is an error, not a no-op.
Status only_keys(const json& c, std::initializer_list<const char*> keys) {
  for (const auto& item : c.items()) {
    const std::string& key = item.key();
    if (key == "cmd") continue;
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return key == k; })) {
      std::string known;
      for (const char* k : keys) known += (known.empty() ? "" : ", ") + std::string(k);
      return Status::Error("unknown field '" + key + "'" + (known.empty() ? " (it takes none)" : " (it takes " + known + ")"));
    }
  }
  return Status::Ok();
}

// An integer field in [lo, hi]; `fallback` when absent (required when there is none).
StatusOr<std::int32_t> int_field(const json& c, const char* key, std::int32_t lo, std::int32_t hi,
                                 std::optional<std::int32_t> fallback = std::nullopt) {
  if (!c.contains(key)) {
    if (fallback) return *fallback;
    return Status::Error("missing field '" + std::string(key) + "'");
  }
  const json& v = c.at(key);
  if (!v.is_number_integer())
    return Status::Error("'" + std::string(key) + "' must be an integer, got " + v.dump());
  const bool in_range = v.is_number_unsigned() ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
                                               : v.get<std::int64_t>() >= lo && v.get<std::int64_t>() <= hi;
  if (!in_range || v.get<std::int64_t>() < lo)
    return Status::Error("'" + std::string(key) + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "], got " + v.dump());
  return static_cast<std::int32_t>(v.get<std::int64_t>());
}

json devices_json(const std::vector<std::int32_t>& devices) { return devices; }

json weight_copy_json(const WeightCopy& w) {
  return {{"block", w.block}, {"expert", w.expert}, {"from", w.source}, {"to", w.target}, {"bytes", w.bytes},
          {"started_ns", w.started_ns}};
}

// get_state's "weights": what each device holds and what is on its way.
json weights_json(const Cluster& cluster, const Coordinator& co) {
  const ExpertResidency& r = cluster.residency();
  json copies = json::array();
  for (const WeightCopy& w : cluster.copies_in_flight()) copies.push_back(weight_copy_json(w));
  json devices = json::array();
  for (std::int32_t d = 0; d < r.num_devices(); ++d) {
    devices.push_back({{"device", d},
                       {"capacity_bytes", r.capacity(d) > 0 ? json(r.capacity(d)) : json(nullptr)},
                       {"used_bytes", r.used_bytes(d)},
                       {"kv_bytes", r.fixed(d)},
                       {"experts", r.resident_experts(d)},
                       {"arriving", r.arriving_experts(d)}});
  }
  return {{"expert_bytes", r.expert_bytes()}, {"staged", co.staging()}, {"copies", std::move(copies)},
          {"devices", std::move(devices)}};
}

// The control topic's record of one command (docs/telemetry-protocol.md, `control`).
json control_event(std::int64_t t_ns, const json& request, json old_value, json new_value, const std::string& error) {
  return {{"t_ns", t_ns},
          {"cmd", request.at("cmd")},
          {"request", request},
          {"old", std::move(old_value)},
          {"new", std::move(new_value)},
          {"ok", error.empty()},
          {"error", error.empty() ? json(nullptr) : json(error)}};
}

}  // namespace

ControlCommands::ControlCommands(Deployment& deployment, TelemetryBridge& bridge, telemetry::TelemetryHub& hub,
                                 Hooks hooks, const telemetry::RecordingDirectory* recordings, std::uint64_t record_max)
    : d_(deployment),
      bridge_(bridge),
      hub_(hub),
      hooks_(std::move(hooks)),
      recordings_(recordings),
      record_max_(record_max),
      alive_(std::make_shared<bool>(true)) {}

ControlCommands::~ControlCommands() {
  alive_.reset();
  if (stopper_.joinable()) stopper_.join();
}

const std::vector<std::string>& ControlCommands::names() {
  static const std::vector<std::string> kNames = {
      "get_state",        "set_policy",    "set_microbatches", "move_expert", "replicate_expert", "set_placement",
      "pause",            "resume",        "record_start",     "record_stop", "record_dump", "set_workload",
      "plan",             "apply_plan"};
  return kNames;
}

void ControlCommands::fail(const json& c, const Reply& reply, const std::string& error) {
  const std::string cmd = cmd_of(c);
  reply({{"ok", false}, {"error", cmd + ": " + error}});
  bridge_.publish_control(control_event(d_.loop().now(), c, nullptr, nullptr, cmd + ": " + error));
}

void ControlCommands::succeed(const json& c, const Reply& reply, json old_value, json new_value, json fields) {
  fields["ok"] = true;
  fields["cmd"] = cmd_of(c);
  fields["old"] = old_value;
  fields["new"] = new_value;
  reply(fields);
  bridge_.publish_control(control_event(d_.loop().now(), c, std::move(old_value), std::move(new_value), ""));
  bridge_.publish_meta();
}

void ControlCommands::handle(const json& c, Reply reply) {
  if (!c.is_object() || !c.contains("cmd") || !c.at("cmd").is_string()) {
    reply({{"ok", false}, {"error", "a command is a JSON object with a string field \"cmd\""}});
    return;
  }
  const std::string cmd = cmd_of(c);
  if (cmd == "get_state") return get_state(c, reply);
  if (cmd == "set_policy") return set_policy(c, reply);
  if (cmd == "set_microbatches") return set_microbatches(c, reply);
  if (cmd == "move_expert") return move_expert(c, reply, false);
  if (cmd == "replicate_expert") return move_expert(c, reply, true);
  if (cmd == "set_placement") return set_placement(c, reply);
  if (cmd == "pause") return set_admission(c, reply, true);
  if (cmd == "resume") return set_admission(c, reply, false);
  if (cmd == "record_start") return record_start(c, reply);
  if (cmd == "record_stop") return record_stop(c, reply);
  if (cmd == "record_dump") return record_dump(c, reply);
  if (cmd == "set_workload") return set_workload(c, reply);
  if (cmd == "plan") return plan(c, reply);
  if (cmd == "apply_plan") return apply_plan(c, reply);
  std::string known;
  for (const auto& n : names()) known += (known.empty() ? "" : ", ") + n;
  reply({{"ok", false}, {"error", "unknown command '" + cmd + "' (known: " + known + ")"}});
}

void ControlCommands::get_state(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {}); !s.ok()) return fail(c, reply, s.message());
  json state = bridge_.meta();
  state["load"] = bridge_.load();
  const Coordinator& co = d_.coordinator();
  // What requests hold right now: a cancelled request's pages are gone from here at once.
  state["kv"] = {{"pages_used", co.kv_pages_used()}, {"pages_total", co.kv_pages_total()}};
  state["requests"] = {{"open", co.open_requests()}, {"waiting", co.waiting_requests()}};
  state["weights"] = weights_json(d_.cluster(), co);
  reply({{"ok", true}, {"cmd", "get_state"}, {"state", std::move(state)}});
}

void ControlCommands::apply_policy(const json& c, const Reply& reply, const PolicySpec& spec) {
  auto policy = runtime_policy(spec);
  if (!policy.ok()) return fail(c, reply, policy.status().message());
  Coordinator& co = d_.coordinator();
  json old_value = policy_spec(co.target_policy()).to_json();
  json new_value = spec.to_json();
  std::weak_ptr<bool> alive = alive_;
  Status s = co.request_policy(*policy, [this, alive, c, reply, old_value, new_value](std::int64_t t) {
    if (alive.expired()) return;
    succeed(c, reply, old_value, new_value, {{"applied_at_ns", t}});
  });
  if (!s.ok()) return fail(c, reply, s.message());
  bridge_.publish_meta();  // meta shows "switching" until the safe point
}

void ControlCommands::set_policy(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"policy", "params"}); !s.ok()) return fail(c, reply, s.message());
  json changes = json::object();
  if (c.contains("params")) {
    if (!c.at("params").is_object()) return fail(c, reply, "'params' must be an object, got " + c.at("params").dump());
    changes = c.at("params");
  }
  if (c.contains("policy")) {
    if (!c.at("policy").is_string()) return fail(c, reply, "'policy' must be a string, got " + c.at("policy").dump());
    changes["name"] = c.at("policy");
  }
  if (changes.empty()) return fail(c, reply, "nothing to change: give 'policy' and/or 'params'");
  auto spec = PolicySpec::from_json(changes, policy_spec(d_.coordinator().target_policy()));
  if (!spec.ok()) return fail(c, reply, spec.status().message());
  apply_policy(c, reply, *spec);
}

void ControlCommands::set_microbatches(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"m"}); !s.ok()) return fail(c, reply, s.message());
  auto m = int_field(c, "m", 1, kMaxMicrobatches);
  if (!m.ok()) return fail(c, reply, m.status().message());
  PolicySpec spec = policy_spec(d_.coordinator().target_policy());
  spec.microbatches = *m;
  apply_policy(c, reply, spec);
}

void ControlCommands::move_expert(const json& c, const Reply& reply, bool replicate) {
  const Status keys = replicate ? only_keys(c, {"block", "expert", "to"}) : only_keys(c, {"block", "expert", "from", "to"});
  if (!keys.ok()) return fail(c, reply, keys.message());
  const Topology& topo = d_.cluster().topology();
  auto block = int_field(c, "block", -1, topo.num_blocks - 1, -1);
  auto expert = int_field(c, "expert", 0, topo.num_experts - 1);
  auto to = int_field(c, "to", 0, topo.num_devices - 1);
  auto from = replicate ? StatusOr<std::int32_t>(-1) : int_field(c, "from", 0, topo.num_devices - 1);
  for (const Status* s : {&block.status(), &expert.status(), &to.status(), &from.status()})
    if (!s->ok()) return fail(c, reply, s->message());
  if (!replicate && *from == *to) return fail(c, reply, "'from' and 'to' are the same device");
  if (*block >= 0 && !topo.sparse[*block]) return fail(c, reply, "block " + std::to_string(*block) + " has no routed experts");

  Placement placement = d_.coordinator().target_placement();
  json old_value = json::array(), new_value = json::array();
  for (std::int32_t b = 0; b < topo.num_blocks; ++b) {
    if (!topo.sparse[b] || (*block >= 0 && b != *block)) continue;
    std::vector<std::int32_t> devices = placement.devices(b, *expert);
    const std::string what = "expert " + std::to_string(*expert) + " of block " + std::to_string(b);
    const auto has = [&](std::int32_t d) { return placement.holds(b, *expert, d); };
    old_value.push_back({{"block", b}, {"devices", devices_json(devices)}});
    if (replicate) {
      if (has(*to)) return fail(c, reply, what + " is already on device " + std::to_string(*to));
      devices.push_back(*to);
    } else {
      if (!has(*from)) {
        std::string on;
        for (std::int32_t d : devices) on += (on.empty() ? "" : ", ") + std::to_string(d);
        return fail(c, reply, what + " is not on device " + std::to_string(*from) + " (it is on " + on + ")");
      }
      std::erase(devices, *from);
      if (!has(*to)) devices.push_back(*to);
    }
    if (Status s = placement.set(b, *expert, std::move(devices)); !s.ok()) return fail(c, reply, s.message());
    new_value.push_back({{"block", b}, {"devices", devices_json(placement.devices(b, *expert))}});
  }
  apply_placement(c, reply, std::move(placement), std::move(old_value), std::move(new_value));
}

void ControlCommands::set_placement(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"placement"}); !s.ok()) return fail(c, reply, s.message());
  if (!c.contains("placement")) return fail(c, reply, "missing field 'placement'");
  const Topology& topo = d_.cluster().topology();
  auto placement = Placement::from_json(c.at("placement"), topo.num_experts, topo.sparse);
  if (!placement.ok()) return fail(c, reply, placement.status().message());
  if (Status s = placement->validate(topo.num_devices); !s.ok()) return fail(c, reply, s.message());
  json old_value = d_.coordinator().target_placement().to_json();
  json new_value = placement->to_json();
  apply_placement(c, reply, std::move(*placement), std::move(old_value), std::move(new_value));
}

void ControlCommands::apply_placement(const json& c, const Reply& reply, Placement placement, json old_value,
                                      json new_value) {
  std::weak_ptr<bool> alive = alive_;
  // Weights to copy first: answered at once as pending, the switch announced on the control
  // topic when it happens. Nothing to copy: answered once applied, as policy changes are.
  auto pending = std::make_shared<bool>(false);
  std::vector<WeightCopy> copies;
  Coordinator& co = d_.coordinator();
  Status s = co.request_placement(
      std::move(placement),
      [this, alive, c, reply, old_value, new_value, pending](std::int64_t t) {
        if (alive.expired()) return;
        if (!*pending) return succeed(c, reply, old_value, new_value, {{"applied_at_ns", t}});
        json event = control_event(t, c, old_value, new_value, "");
        event["phase"] = "applied";
        event["applied_at_ns"] = t;
        bridge_.publish_control(std::move(event));
        bridge_.publish_meta();
      },
      &copies);
  if (!s.ok()) return fail(c, reply, s.message());
  if (co.staging()) {
    *pending = true;
    json list = json::array();
    for (const WeightCopy& w : copies) list.push_back(weight_copy_json(w));
    reply({{"ok", true}, {"cmd", cmd_of(c)}, {"old", old_value}, {"new", new_value}, {"pending", true}, {"copies", list}});
    json event = control_event(d_.loop().now(), c, old_value, new_value, "");
    event["phase"] = "copying";
    event["copies"] = std::move(list);
    bridge_.publish_control(std::move(event));
  }
  bridge_.publish_meta();
}

void ControlCommands::set_admission(const json& c, const Reply& reply, bool paused) {
  if (Status s = only_keys(c, {}); !s.ok()) return fail(c, reply, s.message());
  Coordinator& co = d_.coordinator();
  const bool was = co.admission_paused();
  co.set_admission_paused(paused);
  succeed(c, reply, {{"admission_paused", was}}, {{"admission_paused", paused}});
}

void ControlCommands::record_start(const json& c, const Reply& reply) {
  if (c.contains("mode")) {
    if (!c.at("mode").is_string() || (c.at("mode") != "ring" && c.at("mode") != "file"))
      return fail(c, reply, "'mode' must be \"file\" (the default) or \"ring\", got " + c.at("mode").dump());
    if (c.at("mode") == "ring") return record_start_ring(c, reply);
  }
  if (Status s = only_keys(c, {"path", "overwrite", "mode"}); !s.ok()) return fail(c, reply, s.message());
  if (!c.contains("path") || !c.at("path").is_string() || c.at("path").get<std::string>().empty())
    return fail(c, reply, "'path' must be a non-empty string (the .db file to create in the recording directory)");
  if (c.contains("overwrite") && !c.at("overwrite").is_boolean())
    return fail(c, reply, "'overwrite' must be true or false, got " + c.at("overwrite").dump());
  if (!recordings_) return fail(c, reply, "this engine has no recording directory: recording over control is off");
  // Only a file inside the recording directory chosen at start-up, never anything else.
  auto path = recordings_->resolve(c.at("path").get<std::string>(), c.value("overwrite", false));
  if (!path.ok()) return fail(c, reply, path.status().message());
  if (stopper_.joinable()) stopper_.join();  // a previous recording still building its indexes
  telemetry::RecorderOptions o;
  o.path = *path;
  o.max_bytes = record_max_;
  o.metadata = bridge_.recording_metadata();
  o.device_names = d_.cluster().topology().device_names;
  o.overwrite = c.value("overwrite", false);
  auto old_path = hub_.recording_path();
  Status s = hub_.start_recording(o);
  if (!s.ok()) return fail(c, reply, s.message());
  succeed(c, reply, old_path ? json(old_path->string()) : json(nullptr), o.path.string(), {{"path", o.path.string()}});
}

// The most memory a flight recorder may hold, in MB (a minute of the demo takes about 60).
constexpr double kMaxRingMegabytes = 4096;

// A positive number field, or an error naming it.
static StatusOr<std::optional<double>> positive(const char* key, const json& in) {
  if (!in.contains(key)) return std::optional<double>();
  if (!in.at(key).is_number() || !(in.at(key).get<double>() > 0) || in.at(key).get<double>() > 1e9)
    return Status::Error(std::string("'") + key + "' must be a positive number, got " + in.at(key).dump());
  return std::optional<double>(in.at(key).get<double>());
}

void ControlCommands::record_start_ring(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"path", "overwrite", "mode", "minutes", "megabytes", "trigger"}); !s.ok())
    return fail(c, reply, s.message());
  if (!c.contains("path") || !c.at("path").is_string() || c.at("path").get<std::string>().empty())
    return fail(c, reply, "'path' must be a non-empty string (the .db file a trigger or record_dump writes)");
  if (c.contains("overwrite") && !c.at("overwrite").is_boolean())
    return fail(c, reply, "'overwrite' must be true or false, got " + c.at("overwrite").dump());
  auto minutes = positive("minutes", c);
  if (!minutes.ok()) return fail(c, reply, minutes.status().message());
  auto megabytes = positive("megabytes", c);
  if (!megabytes.ok()) return fail(c, reply, megabytes.status().message());
  if (!*minutes && !*megabytes) return fail(c, reply, "a ring keeps the last 'minutes' or 'megabytes': give one or both");
  // A control client sets the engine's memory here: bounded whatever it asks.
  if (*megabytes && **megabytes > kMaxRingMegabytes)
    return fail(c, reply, "'megabytes' must be at most " + std::to_string(static_cast<int>(kMaxRingMegabytes)));
  telemetry::RingTrigger trigger;
  if (c.contains("trigger")) {
    const json& t = c.at("trigger");
    if (!t.is_object()) return fail(c, reply, "'trigger' must be an object such as {\"itl_p99_ms\": 50}");
    for (const auto& [k, v] : t.items()) {
      if (k != "itl_p99_ms" && k != "stall_fraction" && k != "rank_lost")
        return fail(c, reply, "unknown trigger '" + k + "' (known: itl_p99_ms, stall_fraction, rank_lost)");
    }
    if (t.contains("rank_lost") && !t.at("rank_lost").is_boolean())
      return fail(c, reply, "trigger: 'rank_lost' must be true or false, got " + t.at("rank_lost").dump());
    trigger.rank_lost = t.value("rank_lost", false);
    auto itl = positive("itl_p99_ms", t);
    if (!itl.ok()) return fail(c, reply, "trigger: " + itl.status().message());
    auto stall = positive("stall_fraction", t);
    if (!stall.ok()) return fail(c, reply, "trigger: " + stall.status().message());
    if (*stall && **stall > 1) return fail(c, reply, "trigger: 'stall_fraction' is a fraction of the window, at most 1");
    trigger.itl_p99_ms = *itl;
    trigger.stall_fraction = *stall;
  }
  if (!recordings_) return fail(c, reply, "this engine has no recording directory: recording over control is off");
  // Only a file inside the recording directory chosen at start-up, never anything else.
  auto path = recordings_->resolve(c.at("path").get<std::string>(), c.value("overwrite", false));
  if (!path.ok()) return fail(c, reply, path.status().message());
  telemetry::FlightRecorderOptions o;
  if (*minutes) o.keep_ns = static_cast<std::int64_t>(**minutes * 60e9);
  // The ring's own memory (at most kMaxRingMegabytes even when only minutes are given);
  // --record-max still caps what a dump may write.
  o.max_bytes = static_cast<std::uint64_t>((*megabytes ? **megabytes : kMaxRingMegabytes) * 1e6);
  telemetry::RecorderOptions to;
  to.path = *path;
  to.overwrite = c.value("overwrite", false);
  to.max_bytes = record_max_;
  to.metadata = bridge_.recording_metadata();
  to.device_names = d_.cluster().topology().device_names;
  std::weak_ptr<bool> alive = alive_;
  // A triggered dump reports itself on the control topic, as a record_dump with its trigger.
  auto on_trigger = [this, alive](const telemetry::RingDumpEvent& e) {
    if (alive.expired()) return;
    json event = {{"t_ns", nullptr}, {"cmd", "record_dump"}, {"ok", e.status.ok()}, {"trigger", e.reason},
                  {"path", e.path.string()}};
    if (!e.status.ok()) event["error"] = "record_dump: " + e.status.message();
    (void)hub_.publish_json(telemetry::Topic::Control, event.dump());
  };
  Status s = hub_.start_ring(o, trigger, to, on_trigger);
  if (!s.ok()) return fail(c, reply, s.message());
  json ring = {{"path", path->string()}};
  if (*minutes) ring["minutes"] = **minutes;
  if (*megabytes) ring["megabytes"] = **megabytes;
  if (trigger.itl_p99_ms) ring["trigger"]["itl_p99_ms"] = *trigger.itl_p99_ms;
  if (trigger.stall_fraction) ring["trigger"]["stall_fraction"] = *trigger.stall_fraction;
  if (trigger.rank_lost) ring["trigger"]["rank_lost"] = true;
  succeed(c, reply, nullptr, ring, {{"path", path->string()}, {"mode", "ring"}});
}

void ControlCommands::record_dump(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"path", "overwrite"}); !s.ok()) return fail(c, reply, s.message());
  auto ring_path = hub_.ring_path();
  if (!ring_path) return fail(c, reply, "no flight recorder is running (record_start with \"mode\":\"ring\")");
  std::filesystem::path file = *ring_path;
  if (c.contains("path")) {
    if (!c.at("path").is_string() || c.at("path").get<std::string>().empty())
      return fail(c, reply, "'path' must be a non-empty string");
    if (c.contains("overwrite") && !c.at("overwrite").is_boolean())
      return fail(c, reply, "'overwrite' must be true or false, got " + c.at("overwrite").dump());
    if (!recordings_) return fail(c, reply, "this engine has no recording directory: recording over control is off");
    auto resolved = recordings_->resolve(c.at("path").get<std::string>(), c.value("overwrite", false));
    if (!resolved.ok()) return fail(c, reply, resolved.status().message());
    file = *resolved;
  }
  if (stopper_.joinable()) stopper_.join();
  telemetry::RecorderOptions to;
  to.path = file;
  to.overwrite = c.value("overwrite", false);
  to.max_bytes = record_max_;
  to.metadata = bridge_.recording_metadata();
  to.device_names = d_.cluster().topology().device_names;
  const std::int64_t t = d_.loop().now();
  // Writing compresses and commits a minute of the stream: off the loop, like record_stop.
  stopper_ = std::thread([this, c, reply, t, to = std::move(to)]() mutable {
    const std::string file_name = to.path.string();
    const Status s = hub_.dump_ring(std::move(to));
    const std::string error = s.ok() ? "" : "record_dump: " + s.message();
    if (s.ok()) {
      reply({{"ok", true}, {"cmd", "record_dump"}, {"path", file_name}, {"old", nullptr}, {"new", file_name}});
    } else {
      reply({{"ok", false}, {"error", error}});
    }
    (void)hub_.publish_json(telemetry::Topic::Control, control_event(t, c, nullptr, file_name, error).dump());
  });
}

void ControlCommands::record_stop(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {}); !s.ok()) return fail(c, reply, s.message());
  auto path = hub_.recording_path();
  if (auto ring = hub_.ring_path(); !path && ring) {  // a ring is discarded: nothing to write
    const Status s = hub_.stop_ring();
    if (!s.ok()) return fail(c, reply, s.message());
    return succeed(c, reply, ring->string(), nullptr, {{"mode", "ring"}, {"path", ring->string()}});
  }
  if (!path) return fail(c, reply, "no recording is running");
  if (stopper_.joinable()) stopper_.join();
  // Stopping builds the trace's indexes, which takes a while on a big trace: not on the loop.
  const std::int64_t t = d_.loop().now();
  std::weak_ptr<bool> alive = alive_;
  // The processes' clock offsets, measured over the run, go into the trace as they are now.
  std::map<std::string, std::string> final_metadata;
  if (const json processes = bridge_.meta()["processes"]; !processes.is_null()) final_metadata["processes"] = processes.dump();
  stopper_ = std::thread([this, alive, c, reply, t, file = path->string(), final_metadata = std::move(final_metadata)] {
    const Status s = hub_.stop_recording(final_metadata);
    const std::string error = s.ok() ? "" : "record_stop: " + s.message();
    if (s.ok()) {
      reply({{"ok", true}, {"cmd", "record_stop"}, {"path", file}, {"old", file}, {"new", nullptr}});
    } else {
      reply({{"ok", false}, {"error", error}});
    }
    // The hub takes JSON from any thread; meta reads the deployment, so it goes via the loop.
    (void)hub_.publish_json(telemetry::Topic::Control, control_event(t, c, file, nullptr, error).dump());
    d_.loop().post_external([this, alive] {
      if (!alive.expired()) bridge_.publish_meta();
    });
  });
}

void ControlCommands::set_workload(const json& c, const Reply& reply) {
  if (!hooks_.set_workload)
    return fail(c, reply, "this run's workload is not generated live (only `switchyard demo` takes set_workload)");
  auto workload = hooks_.set_workload(c);
  if (!workload.ok()) return fail(c, reply, workload.status().message());
  json old_value = bridge_.workload();
  bridge_.set_workload(*workload);
  succeed(c, reply, std::move(old_value), *workload, {{"workload", *workload}});
}

void ControlCommands::plan(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"slo_ms", "top"}); !s.ok()) return fail(c, reply, s.message());
  auto top = int_field(c, "top", 1, 100, 5);
  if (!top.ok()) return fail(c, reply, top.status().message());
  double slo_ms = 0;
  if (c.contains("slo_ms")) {
    const json& v = c.at("slo_ms");
    if (!v.is_number() || v.get<double>() < 0) return fail(c, reply, "'slo_ms' must be a number >= 0, got " + v.dump());
    slo_ms = v.get<double>();
  }
  const RunInfo& info = bridge_.info();
  if (info.hardware.empty())
    return fail(c, reply, "plans need a device profile; this deployment runs on the " + info.backend + " backend without one");
  auto hw = find_hardware_profile(info.hardware);
  if (!hw.ok()) return fail(c, reply, hw.status().message());
  PlanInputs in;
  in.config = info.model;
  in.attention_hw = *hw;
  in.expert_hw = *hw;
  in.slo_ms = slo_ms;
  if (info.devices_per_node > 0) in.devices_per_node = info.devices_per_node;
  LengthClass lengths = LengthClass::Medium;
  const json workload = bridge_.workload();
  if (workload.is_object() && workload.contains("length_class") && workload.at("length_class").is_string())
    if (auto l = parse_length_class(workload.at("length_class").get<std::string>()); l.ok()) lengths = *l;
  set_plan_lengths(in, lengths);
  const Coordinator& co = d_.coordinator();
  const PolicySpec spec = policy_spec(co.target_policy());
  const LiveDeployment live =
      LiveDeployment::of(d_.cluster().topology(), spec.policy, spec.microbatches, co.max_batch_per_rank());
  json inputs = plan_inputs_to_json(in);
  inputs["lengths"] = length_class_name(lengths);
  reply({{"ok", true}, {"cmd", "plan"}, {"model", info.model_name}, {"inputs", std::move(inputs)},
         {"current", live.to_json()}, {"plans", live_plans(in, live, *top)}});
}

void ControlCommands::apply_plan(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"plan"}); !s.ok()) return fail(c, reply, s.message());
  if (!c.contains("plan")) return fail(c, reply, "missing field 'plan'");
  auto shape = plan_shape_from_json(c.at("plan"));
  if (!shape.ok()) return fail(c, reply, shape.status().message());
  Coordinator& co = d_.coordinator();
  const PolicySpec current = policy_spec(co.target_policy());
  const LiveDeployment live =
      LiveDeployment::of(d_.cluster().topology(), current.policy, current.microbatches, co.max_batch_per_rank());
  if (const std::string why = live_refusal(live, *shape); !why.empty())
    return fail(c, reply, "cannot apply this plan live: " + why);
  PolicySpec spec = current;
  spec.policy = "pingpong";
  spec.microbatches = shape->m;
  auto policy = runtime_policy(spec);
  if (!policy.ok()) return fail(c, reply, policy.status().message());
  const std::int64_t batch = static_cast<std::int64_t>(shape->b_a) * shape->m;
  if (batch > 1'000'000) return fail(c, reply, "plan: b_a·m = " + std::to_string(batch) + " sequences per rank is too many");
  json old_value = {{"policy", current.to_json()}, {"max_batch_per_rank", co.max_batch_per_rank()}};
  json new_value = {{"policy", spec.to_json()}, {"max_batch_per_rank", batch}};
  std::weak_ptr<bool> alive = alive_;
  const auto max_batch = static_cast<std::int32_t>(batch);
  Status s = co.request_policy(*policy, [this, alive, c, reply, old_value, new_value, max_batch](std::int64_t t) {
    if (alive.expired()) return;
    // The batch limit only gates admission: it changes with the policy, at the safe point.
    d_.coordinator().set_max_batch_per_rank(max_batch);
    succeed(c, reply, old_value, new_value, {{"applied_at_ns", t}});
  });
  if (!s.ok()) return fail(c, reply, s.message());
  bridge_.publish_meta();
}

}  // namespace sy
