#include "engine/serving/control_commands.h"

#include <algorithm>

#include "engine/plan/live_plan.h"
#include "engine/sim/hardware_profile.h"
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
      alive_(std::make_shared<bool>(true)) {
  // One expert's weights in every sparse block, against 90 % of a device (as the planner's
  // memory_fraction): how many replicas per block a device can hold. Attention weights and KV
  // on colocated devices are not subtracted.
  const RunInfo& info = bridge_.info();
  const ModelConfig& m = info.model;
  std::int64_t sparse = 0;
  for (bool b : m.sparse_layers) sparse += b ? 1 : 0;
  if (!info.hardware.empty() && m.num_experts > m.top_k && sparse > 0) {
    if (auto hw = find_hardware_profile(info.hardware); hw.ok()) {
      const double expert_params = static_cast<double>(m.parameter_count() - m.active_parameter_count()) /
                                   static_cast<double>((m.num_experts - m.top_k) * sparse);
      const double bytes = expert_params * static_cast<double>(kernels::dtype_size(m.dtype)) * static_cast<double>(sparse);
      if (bytes > 0) memory_slots_ = static_cast<std::int32_t>(std::min(1e6, hw->memory_gib * 0.9 * 1073741824.0 / bytes));
    }
  }
}

ControlCommands::~ControlCommands() {
  alive_.reset();
  if (stopper_.joinable()) stopper_.join();
}

const std::vector<std::string>& ControlCommands::names() {
  static const std::vector<std::string> kNames = {
      "get_state",        "set_policy",    "set_microbatches", "move_expert", "replicate_expert", "set_placement",
      "pause",            "resume",        "record_start",     "record_stop", "record_dump", "set_workload",
      "plan",             "apply_plan",    "rebalance",        "set_rebalance",    "set_max_num_batched_tokens"};
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
  if (cmd == "rebalance") return rebalance(c, reply);
  if (cmd == "set_rebalance") return set_rebalance(c, reply);
  if (cmd == "set_max_num_batched_tokens") return set_max_num_batched_tokens(c, reply);
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
  state["kv"] = {{"pages_used", co.kv_pages_used()},
                 {"pages_total", co.kv_pages_total()},
                 {"prefix_cache", {{"enabled", co.options().prefix_caching},
                                   {"queries", co.prefix_cache_queries()},
                                   {"hits", co.prefix_cache_hits()}}}};
  state["requests"] = {{"open", co.open_requests()}, {"waiting", co.waiting_requests()}};
  state["weights"] = weights_json(d_.cluster(), co);
  reply({{"ok", true}, {"cmd", "get_state"}, {"state", std::move(state)}});
}

void ControlCommands::apply_policy(const json& c, const Reply& reply, const PolicySpec& spec, json fields) {
  auto policy = runtime_policy(spec);
  if (!policy.ok()) return fail(c, reply, policy.status().message());
  Coordinator& co = d_.coordinator();
  // Staying adaptive (e.g. a parameter changed): keep the policy the engine has chosen.
  if (policy->adaptive && co.target_policy().adaptive) policy->kind = co.target_policy().kind;
  json old_value = policy_spec(co.target_policy()).to_json();
  json new_value = spec.to_json();
  std::weak_ptr<bool> alive = alive_;
  Status s = co.request_policy(*policy, [this, alive, c, reply, old_value, new_value, fields](std::int64_t t) mutable {
    if (alive.expired()) return;
    fields["applied_at_ns"] = t;
    succeed(c, reply, old_value, new_value, std::move(fields));
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
  // expert_chunks "auto": FinDEP's solver chooses r1, r2 and the order for this deployment now.
  const bool solve = changes.contains("expert_chunks") && changes.at("expert_chunks") == "auto";
  if (solve) {
    for (const char* key : {"microbatches", "order"})
      if (changes.contains(key))
        return fail(c, reply, std::string("expert_chunks \"auto\" chooses ") + key + " too: leave it out");
    changes.erase("expert_chunks");
  }
  auto spec = PolicySpec::from_json(changes, policy_spec(d_.coordinator().target_policy()));
  if (!spec.ok()) return fail(c, reply, spec.status().message());
  if (!solve) return apply_policy(c, reply, *spec);
  if (spec->policy != "findep")
    return fail(c, reply, "expert_chunks \"auto\" is findep's: policy is '" + spec->policy + "'");
  const FindepCostBasis* basis = d_.options().findep_costs.get();
  if (!basis) return fail(c, reply, "findep: this deployment has no cost model for the solver");
  const Coordinator& co = d_.coordinator();
  const Topology& topology = d_.cluster().topology();
  auto solution = solve_findep_for(*basis, topology, co.max_batch_per_rank(), co.mean_context());
  if (!solution.ok()) return fail(c, reply, solution.status().message());
  apply_policy(c, reply, findep_policy_spec(*spec, *solution),
               {{"findep", findep_choice_json(*solution, *basis, topology, co.max_batch_per_rank(), co.mean_context())}});
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
                                      json new_value, json fields) {
  std::weak_ptr<bool> alive = alive_;
  // Weights to copy first: answered at once as pending, the switch announced on the control
  // topic when it happens. Nothing to copy: answered once applied, as policy changes are.
  auto pending = std::make_shared<bool>(false);
  std::vector<WeightCopy> copies;
  Coordinator& co = d_.coordinator();
  Status s = co.request_placement(
      std::move(placement),
      [this, alive, c, reply, old_value, new_value, fields, pending](std::int64_t t) mutable {
        if (alive.expired()) return;
        fields["applied_at_ns"] = t;
        if (!*pending) return succeed(c, reply, old_value, new_value, fields);
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
    json answer = fields;
    answer["ok"] = true;
    answer["cmd"] = cmd_of(c);
    answer["old"] = old_value;
    answer["new"] = new_value;
    answer["pending"] = true;
    answer["copies"] = list;
    reply(answer);
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

void ControlCommands::set_max_num_batched_tokens(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"n"}); !s.ok()) return fail(c, reply, s.message());
  auto n = int_field(c, "n", 0, 1 << 24);
  if (!n.ok()) return fail(c, reply, n.status().message());
  // The budget only shapes passes still to come: it needs no safe point.
  Coordinator& co = d_.coordinator();
  const std::int32_t was = co.options().max_num_batched_tokens;
  co.set_max_num_batched_tokens(*n);
  succeed(c, reply, {{"max_num_batched_tokens", was}}, {{"max_num_batched_tokens", *n}});
  bridge_.publish_meta();  // meta's batching shows the new budget
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
  // Checked before anything reads it: a value() of the wrong type throws, on the loop.
  if (c.contains("overwrite") && !c.at("overwrite").is_boolean())
    return fail(c, reply, "'overwrite' must be true or false, got " + c.at("overwrite").dump());
  const bool overwrite = c.contains("overwrite") && c.at("overwrite").get<bool>();
  std::filesystem::path file = *ring_path;
  if (c.contains("path")) {
    if (!c.at("path").is_string() || c.at("path").get<std::string>().empty())
      return fail(c, reply, "'path' must be a non-empty string");
    if (!recordings_) return fail(c, reply, "this engine has no recording directory: recording over control is off");
    auto resolved = recordings_->resolve(c.at("path").get<std::string>(), overwrite);
    if (!resolved.ok()) return fail(c, reply, resolved.status().message());
    file = *resolved;
  } else if (overwrite && std::filesystem::exists(file) && !telemetry::is_switchyard_recording(file)) {
    // The ring's own file is replaced under the same rule as a named one: only a recording.
    return fail(c, reply, file.string() + " exists and is not a Switchyard recording: not overwritten");
  }
  if (stopper_.joinable()) stopper_.join();
  telemetry::RecorderOptions to;
  to.path = file;
  to.overwrite = overwrite;
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
  if (c.size() == 1)  // "cmd" alone, as set_policy refuses it
    return fail(c, reply, "nothing to change: give 'rate', 'skew' or both");
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

StatusOr<ControlCommands::RebalanceRequest> ControlCommands::parse_rebalance(const json& c) const {
  RebalanceRequest r;
  if (c.contains("algorithm")) {
    if (!c.at("algorithm").is_string()) return Status::Error("'algorithm' must be \"greedy\" or \"eplb\", got " + c.at("algorithm").dump());
    auto a = parse_rebalance_algorithm(c.at("algorithm").get<std::string>());
    if (!a.ok()) return a.status();
    r.algorithm = *a;
  }
  const Topology& topo = d_.cluster().topology();
  auto slots = int_field(c, "slots", 1, std::max(1, topo.num_experts), 0);
  if (!slots.ok()) return slots.status();
  r.slots = *slots;
  auto windows = int_field(c, "windows", 1, TelemetryBridge::kLoadHistory, TelemetryBridge::kLoadHistory);
  if (!windows.ok()) return windows.status();
  r.windows = *windows;
  if (c.contains("min_load")) {
    const json& v = c.at("min_load");
    if (!v.is_number() || !(v.get<double>() >= 0) || v.get<double>() > 1e15)
      return Status::Error("'min_load' must be a number >= 0 (tokens per window), got " + v.dump());
    r.min_load = v.get<double>();
  }
  return r;
}

Status ControlCommands::check_slots(std::int32_t slots) const {
  if (slots <= 0 || memory_slots_ <= 0) return Status::Ok();
  // Memory bounds the slots, though never below what a device holds already.
  const Placement& p = d_.coordinator().target_placement();
  std::int32_t most = 0;
  for (std::int32_t b = 0; b < p.num_blocks(); ++b) {
    if (!p.is_sparse(b)) continue;
    std::vector<std::int32_t> used(static_cast<std::size_t>(d_.cluster().topology().num_devices), 0);
    for (std::int32_t e = 0; e < p.num_experts(); ++e)
      for (std::int32_t dev : p.devices(b, e)) most = std::max(most, ++used[static_cast<std::size_t>(dev)]);
  }
  const std::int32_t cap = std::max(memory_slots_, most);
  if (slots > cap)
    return Status::Error("'slots' " + std::to_string(slots) + " exceeds what a device's memory holds (" + std::to_string(cap) +
                         " experts per block)");
  return Status::Ok();
}

StatusOr<RebalanceProposal> ControlCommands::propose(const RebalanceRequest& r, std::int32_t* slots_used,
                                                      std::int64_t* window_ns) const {
  const Topology& topo = d_.cluster().topology();
  const TelemetryBridge::RecentLoad recent = bridge_.recent_expert_load(r.windows);
  if (recent.windows == 0)
    return Status::Error("no expert-load window has closed yet (one closes every summary window): ask again shortly");
  double total = 0;
  for (const auto& row : recent.per_expert)
    for (double v : row) total += v;
  if (total <= 0) return Status::Error("no tokens were routed to experts in the last " + std::to_string(recent.windows) + " windows");
  RebalanceInputs in;
  in.current = d_.coordinator().target_placement();
  in.load = recent.per_expert;
  in.num_devices = topo.num_devices;
  in.min_load = r.min_load;
  // The devices that hold experts now; the most experts one of them holds in a block.
  std::vector<bool> hosts(static_cast<std::size_t>(topo.num_devices), false);
  std::int32_t most = 0;
  for (std::int32_t b = 0; b < in.current.num_blocks(); ++b) {
    if (!in.current.is_sparse(b)) continue;
    std::vector<std::int32_t> used(static_cast<std::size_t>(topo.num_devices), 0);
    for (std::int32_t e = 0; e < in.current.num_experts(); ++e)
      for (std::int32_t dev : in.current.devices(b, e)) {
        hosts[static_cast<std::size_t>(dev)] = true;
        most = std::max(most, ++used[static_cast<std::size_t>(dev)]);
      }
  }
  for (std::int32_t dev = 0; dev < topo.num_devices; ++dev)
    if (hosts[static_cast<std::size_t>(dev)]) in.devices.push_back(dev);
  if (Status s = check_slots(r.slots); !s.ok()) return s;
  const std::int32_t cap = memory_slots_ > 0 ? std::max(memory_slots_, most) : topo.num_experts;
  in.slots_per_device = r.slots > 0 ? r.slots : std::max(most, std::min({most + 1, cap, topo.num_experts}));
  auto proposal = plan_rebalance(r.algorithm, in);
  if (!proposal.ok()) return proposal.status();
  if (slots_used) *slots_used = in.slots_per_device;
  if (window_ns) *window_ns = recent.window_ns;
  return proposal;
}

namespace {

// A control event's view of one side of a rebalance: the changed experts' devices and the
// predicted loads.
json rebalance_side(const json& changes, const char* side, const std::vector<double>& load, double imbalance) {
  json list = json::array();
  for (const json& ch : changes) list.push_back({{"block", ch.at("block")}, {"expert", ch.at("expert")}, {"devices", ch.at(side)}});
  return {{"changes", std::move(list)}, {"load", load}, {"imbalance", imbalance}};
}

}  // namespace

void ControlCommands::apply_proposal(const json& c, const Reply& reply, const RebalanceProposal& proposal,
                                     const Placement& current, json fields) {
  const json changes = fields.at("proposal").at("changes");
  json old_value = rebalance_side(changes, "old", proposal.load_before, proposal.imbalance_before);
  json new_value = rebalance_side(changes, "new", proposal.load_after, proposal.imbalance_after);
  if (proposal.placement == current) {
    fields["applied"] = false;
    return succeed(c, reply, std::move(old_value), std::move(new_value), std::move(fields));
  }
  fields["applied"] = true;
  // The one way a placement changes: set_placement's safe-point path.
  apply_placement(c, reply, proposal.placement, std::move(old_value), std::move(new_value), std::move(fields));
}

void ControlCommands::rebalance(const json& c, const Reply& reply) {
  if (Status s = only_keys(c, {"algorithm", "apply", "slots", "min_load", "windows", "proposal"}); !s.ok())
    return fail(c, reply, s.message());
  if (c.contains("apply") && !c.at("apply").is_boolean())
    return fail(c, reply, "'apply' must be true or false, got " + c.at("apply").dump());
  const bool apply = c.value("apply", false);
  const Placement current = d_.coordinator().target_placement();
  if (c.contains("proposal")) {
    // Apply exactly what was previewed, or nothing.
    if (!apply) return fail(c, reply, "'proposal' applies a previewed proposal: give it with \"apply\": true");
    for (const char* k : {"algorithm", "slots", "min_load", "windows"})
      if (c.contains(k)) return fail(c, reply, std::string("'") + k + "' cannot change a previewed proposal");
    const json& v = c.at("proposal");
    if (!v.is_number_integer()) return fail(c, reply, "'proposal' must be an integer id, got " + v.dump());
    if (!previewed_ || previewed_->id != v.get<std::int64_t>()) {
      if (applied_proposal_id_ != 0 && v.get<std::int64_t>() == applied_proposal_id_)
        return fail(c, reply, "proposal " + v.dump() + " was applied already: preview again for a new one");
      return fail(c, reply, "proposal " + v.dump() + " is not the latest preview" +
                                (previewed_ ? " (" + std::to_string(previewed_->id) + " is)" : " (none is waiting)"));
    }
    if (!(previewed_->base == current))
      return fail(c, reply, "the placement changed since proposal " + v.dump() + " was made: preview again");
    json fields = {{"proposal", to_json(previewed_->proposal, current)}};
    fields["proposal"]["id"] = previewed_->id;
    const RebalanceProposal proposal = previewed_->proposal;
    applied_proposal_id_ = previewed_->id;
    previewed_.reset();
    return apply_proposal(c, reply, proposal, current, std::move(fields));
  }
  auto request = parse_rebalance(c);
  if (!request.ok()) return fail(c, reply, request.status().message());
  std::int32_t slots = 0;
  std::int64_t window_ns = 0;
  auto proposal = propose(*request, &slots, &window_ns);
  if (!proposal.ok()) return fail(c, reply, proposal.status().message());
  json p = to_json(*proposal, current);
  p["slots"] = slots;
  p["window_ns"] = window_ns;
  if (apply) return apply_proposal(c, reply, *proposal, current, {{"proposal", std::move(p)}});
  // A preview changes nothing: answered, not echoed (like plan).
  const std::int64_t id = next_proposal_id_++;
  p["id"] = id;
  previewed_ = Previewed{id, current, *proposal};
  reply({{"ok", true}, {"cmd", "rebalance"}, {"applied", false}, {"proposal", std::move(p)}});
}

void ControlCommands::set_rebalance(const json& c, const Reply& reply) {
  if (!c.contains("mode") || !c.at("mode").is_string() || (c.at("mode") != "off" && c.at("mode") != "periodic"))
    return fail(c, reply, "'mode' must be \"off\" or \"periodic\"" + (c.contains("mode") ? ", got " + c.at("mode").dump() : std::string()));
  const json old_value = bridge_.meta()["rebalance"];
  if (c.at("mode") == "off") {
    if (Status s = only_keys(c, {"mode"}); !s.ok()) return fail(c, reply, s.message());
    periodic_.reset();
    ++periodic_generation_;
    bridge_.set_rebalance(nullptr);
    return succeed(c, reply, old_value, nullptr);
  }
  if (Status s = only_keys(c, {"mode", "interval_s", "threshold", "min_gain", "algorithm", "slots", "min_load", "windows"});
      !s.ok())
    return fail(c, reply, s.message());
  auto request = parse_rebalance(c);
  if (!request.ok()) return fail(c, reply, request.status().message());
  const auto number = [&](const char* key, double lo, double hi, std::optional<double> fallback) -> StatusOr<double> {
    if (!c.contains(key)) {
      if (fallback) return *fallback;
      return Status::Error(std::string("missing field '") + key + "'");
    }
    const json& v = c.at(key);
    if (!v.is_number() || !(v.get<double>() >= lo) || !(v.get<double>() <= hi))
      return Status::Error(std::string("'") + key + "' must be a number in [" + json(lo).dump() + ", " + json(hi).dump() +
                           "], got " + v.dump());
    return v.get<double>();
  };
  auto interval = number("interval_s", 0.01, 86400, std::nullopt);
  if (!interval.ok()) return fail(c, reply, interval.status().message());
  auto threshold = number("threshold", 1, 1e6, std::nullopt);
  if (!threshold.ok()) return fail(c, reply, threshold.status().message());
  auto min_gain = number("min_gain", 0, 1, 0.02);
  if (!min_gain.ok()) return fail(c, reply, min_gain.status().message());
  Periodic p{*request, static_cast<std::int64_t>(*interval * 1e9), *threshold, *min_gain};
  // The slots are checked against memory now, not at the first tick.
  if (Status s = check_slots(request->slots); !s.ok()) return fail(c, reply, s.message());
  json setting = {{"mode", "periodic"},
                  {"interval_s", *interval},
                  {"threshold", *threshold},
                  {"min_gain", *min_gain},
                  {"algorithm", rebalance_algorithm_name(request->algorithm)},
                  {"windows", request->windows},
                  {"min_load", request->min_load},
                  {"slots", request->slots > 0 ? json(request->slots) : json(nullptr)}};
  periodic_ = p;
  const std::uint64_t generation = ++periodic_generation_;
  bridge_.set_rebalance(setting);
  EventLoop& loop = d_.loop();
  std::weak_ptr<bool> alive = alive_;
  loop.post(loop.now() + p.interval_ns, [this, alive, generation] {
    if (!alive.expired()) rebalance_tick(generation);
  });
  succeed(c, reply, old_value, setting, {{"rebalance", setting}});
}

void ControlCommands::rebalance_tick(std::uint64_t generation) {
  if (generation != periodic_generation_ || !periodic_) return;
  const Periodic p = *periodic_;
  EventLoop& loop = d_.loop();
  std::weak_ptr<bool> alive = alive_;
  loop.post(loop.now() + p.interval_ns, [this, alive, generation] {
    if (!alive.expired()) rebalance_tick(generation);
  });
  // A change waiting for its safe point (ours or an operator's) goes first.
  if (d_.coordinator().switching()) return;
  std::int32_t slots = 0;
  std::int64_t window_ns = 0;
  auto proposal = propose(p.request, &slots, &window_ns);
  if (!proposal.ok()) return;  // no load yet: nothing to act on
  if (proposal->imbalance_before < p.threshold || proposal->gain < p.min_gain || proposal->changed_experts == 0) return;
  const Placement current = d_.coordinator().target_placement();
  json request = {{"cmd", "rebalance"},
                  {"apply", true},
                  {"algorithm", rebalance_algorithm_name(p.request.algorithm)},
                  {"trigger", "periodic"}};
  json fields = {{"proposal", to_json(*proposal, current)}};
  fields["proposal"]["slots"] = slots;
  fields["proposal"]["window_ns"] = window_ns;
  apply_proposal(request, [](const json&) {}, *proposal, current, std::move(fields));
}

}  // namespace sy
