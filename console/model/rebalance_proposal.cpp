#include "console/model/rebalance_proposal.h"

#include <cmath>
#include <cstdio>

namespace sy::console {
namespace {

using nlohmann::json;

Status need(const json& j, const char* key, bool (json::*is)() const noexcept, const char* what) {
  if (!j.contains(key) || !(j.at(key).*is)())
    return Status::Error(std::string("rebalance reply: '") + key + "' must be " + what);
  return Status::Ok();
}

}  // namespace

std::string RebalanceProposal::describe() const {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s: max/mean %.2f \u2192 %.2f (gain %.0f %%), %d \u2192 %d replicas, %d experts change",
                algorithm.c_str(), imbalance_before, imbalance_after, std::round(gain * 100), replicas_before,
                replicas_after, changes);
  return buf;
}

StatusOr<RebalanceProposal> parse_rebalance_reply(const json& reply) {
  if (!reply.is_object()) return Status::Error("rebalance reply: not a JSON object");
  SY_RETURN_IF_ERROR(need(reply, "proposal", &json::is_object, "an object"));
  const json& p = reply.at("proposal");
  SY_RETURN_IF_ERROR(need(p, "id", &json::is_number_integer, "an integer"));
  SY_RETURN_IF_ERROR(need(p, "algorithm", &json::is_string, "a string"));
  SY_RETURN_IF_ERROR(need(p, "placement", &json::is_array, "a list"));
  SY_RETURN_IF_ERROR(need(p, "load_before", &json::is_array, "a list"));
  SY_RETURN_IF_ERROR(need(p, "load_after", &json::is_array, "a list"));
  SY_RETURN_IF_ERROR(need(p, "changes", &json::is_array, "a list"));
  for (const char* key : {"imbalance_before", "imbalance_after", "gain"})
    SY_RETURN_IF_ERROR(need(p, key, &json::is_number, "a number"));
  for (const char* key : {"slots", "replicas_before", "replicas_after"})
    SY_RETURN_IF_ERROR(need(p, key, &json::is_number_integer, "an integer"));
  RebalanceProposal out;
  try {
    out.placement = p.at("placement").get<Placement>();
    out.before = p.at("load_before").get<std::vector<double>>();
    out.after = p.at("load_after").get<std::vector<double>>();
  } catch (const json::exception&) {
    return Status::Error("rebalance reply: 'placement', 'load_before' and 'load_after' must be lists of numbers");
  }
  if (out.before.size() != out.after.size())
    return Status::Error("rebalance reply: 'load_before' and 'load_after' differ in length");
  out.id = p.at("id").get<std::int64_t>();
  out.algorithm = p.at("algorithm").get<std::string>();
  out.imbalance_before = p.at("imbalance_before").get<double>();
  out.imbalance_after = p.at("imbalance_after").get<double>();
  out.gain = p.at("gain").get<double>();
  out.slots_per_device = p.at("slots").get<std::int32_t>();
  out.replicas_before = p.at("replicas_before").get<std::int32_t>();
  out.replicas_after = p.at("replicas_after").get<std::int32_t>();
  out.changes = static_cast<std::int32_t>(p.at("changes").size());
  return out;
}

std::string rebalance_preview_request(const std::string& algorithm) {
  return json{{"cmd", "rebalance"}, {"algorithm", algorithm}}.dump();
}

std::string rebalance_apply_request(const RebalanceProposal& proposal) {
  return json{{"cmd", "rebalance"}, {"apply", true}, {"proposal", proposal.id}}.dump();
}

std::string set_rebalance_request(bool periodic, double interval_s, double threshold, const std::string& algorithm) {
  if (!periodic) return json{{"cmd", "set_rebalance"}, {"mode", "off"}}.dump();
  return json{{"cmd", "set_rebalance"},
              {"mode", "periodic"},
              {"interval_s", interval_s},
              {"threshold", threshold},
              {"algorithm", algorithm}}
      .dump();
}

}  // namespace sy::console
