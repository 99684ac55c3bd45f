#include "console/model/run_meta.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace sy::console {
namespace {

using nlohmann::json;

// Reads `key` of `object` into `out` when present and not null; wrong types throw with the key named.
template <class T>
void read(const json& object, const char* key, T& out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return;
  try {
    out = it->get<T>();
  } catch (const json::exception&) {
    throw std::runtime_error(std::string("key \"") + key + "\" has the wrong type (" + it->type_name() + ")");
  }
}

}  // namespace

std::string PolicyInfo::describe() const {
  std::string out = adaptive ? "adaptive, now " : "";
  out += name.empty() ? "?" : name;
  char buf[96];
  if (name == "async") {
    out += "/" + (scheduler.empty() ? std::string("?") : scheduler);
    if (scheduler == "defrag" && lookahead >= 0) {
      std::snprintf(buf, sizeof buf, " (lookahead %d, decay %g)", lookahead, decay);
      out += buf;
    }
  } else if (name == "findep" && microbatches > 0 && expert_chunks > 0) {
    std::snprintf(buf, sizeof buf, " (r1=%d, r2=%d, %s)", microbatches, expert_chunks,
                  order == "aass" ? "AASS" : "ASAS");
    out += buf;
  } else if (name == "pingpong" && microbatches > 0) {
    std::snprintf(buf, sizeof buf, " (m=%d)", microbatches);
    out += buf;
  } else if (name == "sync" && barrier == "ideal") {
    out += " (ideal barrier)";  // the collective barrier is what sync means by default
  }
  return out;
}

std::string RunMeta::device_name(std::int32_t index) const {
  if (const DeviceInfo* d = device(index); d != nullptr && !d->name.empty()) return d->name;
  return "dev " + std::to_string(index);
}

const DeviceInfo* RunMeta::device(std::int32_t index) const {
  for (const DeviceInfo& d : devices)
    if (d.index == index) return &d;
  return nullptr;
}

const ProcessInfo* RunMeta::process_of(std::int32_t device_index) const {
  const DeviceInfo* d = device(device_index);
  if (d == nullptr) return nullptr;
  for (const ProcessInfo& p : processes)
    if (p.rank == d->process) return &p;
  return nullptr;
}

StatusOr<RunMeta> parse_run_meta(const std::string& json_object) {
  json j;
  try {
    j = json::parse(json_object);
  } catch (const json::exception& e) {
    return Status::Error(std::string("meta is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) return Status::Error("meta is not a JSON object");
  RunMeta m;
  try {
    read(j, "schema_version", m.schema_version);
    read(j, "run_id", m.run_id);
    read(j, "clock", m.clock);
    read(j, "wall_origin_unix_ns", m.wall_origin_unix_ns);
    read(j, "pace", m.pace);
    read(j, "now_ns", m.now_ns);
    read(j, "backend", m.backend);
    read(j, "hardware", m.hardware);
    if (auto it = j.find("model"); it != j.end() && it->is_object()) {
      read(*it, "name", m.model_name);
      read(*it, "arch", m.arch);
      read(*it, "blocks", m.blocks);
      read(*it, "experts", m.experts);
      read(*it, "top_k", m.top_k);
      read(*it, "hidden_size", m.hidden_size);
    }
    if (auto it = j.find("devices"); it != j.end() && it->is_array()) {
      for (const json& d : *it) {
        if (!d.is_object()) throw std::runtime_error("an entry of \"devices\" is not an object");
        DeviceInfo info;
        read(d, "index", info.index);
        read(d, "name", info.name);
        read(d, "rank", info.rank);
        read(d, "node", info.node);
        read(d, "process", info.process);
        m.devices.push_back(std::move(info));
      }
    }
    read(j, "placement", m.placement);
    if (auto it = j.find("policy"); it != j.end() && it->is_object()) {
      read(*it, "name", m.policy.name);
      read(*it, "scheduler", m.policy.scheduler);
      read(*it, "lookahead", m.policy.lookahead);
      read(*it, "decay", m.policy.decay);
      read(*it, "microbatches", m.policy.microbatches);
      read(*it, "expert_chunks", m.policy.expert_chunks);
      read(*it, "order", m.policy.order);
      read(*it, "barrier", m.policy.barrier);
      read(*it, "adaptive", m.policy.adaptive);
    }
    read(j, "admission_paused", m.admission_paused);
    if (auto it = j.find("batching"); it != j.end() && it->is_object()) {
      read(*it, "max_batch_per_rank", m.max_batch_per_rank);
      read(*it, "max_num_batched_tokens", m.max_num_batched_tokens);
    }
    if (auto it = j.find("recording"); it != j.end() && it->is_object()) {
      std::string path;
      read(*it, "path", path);
      read(*it, "since_ns", m.recording_since_ns);
      m.recording_path = path;
    }
    if (auto it = j.find("workload"); it != j.end() && it->is_object()) {
      WorkloadInfo w;
      read(*it, "rate", w.rate);
      read(*it, "skew", w.skew);
      read(*it, "length_class", w.length_class);
      m.workload = w;
    }
    if (auto it = j.find("rebalance"); it != j.end() && it->is_object()) {
      RebalanceSetting r;
      read(*it, "interval_s", r.interval_s);
      read(*it, "threshold", r.threshold);
      read(*it, "algorithm", r.algorithm);
      m.rebalance = r;
    }
    read(j, "row_bytes", m.row_bytes);
    if (auto it = j.find("processes"); it != j.end() && it->is_array()) {
      for (const json& p : *it) {
        if (!p.is_object()) throw std::runtime_error("an entry of \"processes\" is not an object");
        ProcessInfo info;
        read(p, "rank", info.rank);
        std::string state;
        read(p, "state", state);
        info.dead = state == "dead";
        read(p, "reason", info.reason);
        if (auto o = p.find("clock_offset_us"); o != p.end() && o->is_number()) info.clock_offset_us = o->get<double>();
        if (auto e = p.find("clock_error_us"); e != p.end() && e->is_number()) info.clock_error_us = e->get<double>();
        m.processes.push_back(std::move(info));
      }
    }
  } catch (const std::exception& e) {
    return Status::Error(std::string("meta: ") + e.what());
  }
  m.json = json_object;
  return m;
}

}  // namespace sy::console
