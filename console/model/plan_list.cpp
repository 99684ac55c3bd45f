#include "console/model/plan_list.h"

namespace sy::console {
namespace {

using nlohmann::json;

Status need(const json& j, const char* key, bool (json::*is)() const noexcept, const char* what) {
  if (!j.contains(key) || !(j.at(key).*is)()) return Status::Error(std::string("plan reply: '") + key + "' must be " + what);
  return Status::Ok();
}

}  // namespace

StatusOr<PlanList> parse_plan_reply(const json& reply) {
  if (!reply.is_object()) return Status::Error("plan reply: not a JSON object");
  SY_RETURN_IF_ERROR(need(reply, "plans", &json::is_array, "a list"));
  SY_RETURN_IF_ERROR(need(reply, "current", &json::is_object, "an object"));
  PlanList list;
  list.model = reply.value("model", "");
  if (reply.contains("inputs") && reply.at("inputs").is_object()) {
    const json& in = reply.at("inputs");
    list.hardware = in.value("attention_hardware", "?") + " / " + in.value("expert_hardware", "?");
  }
  const json& cur = reply.at("current");
  list.current = std::to_string(cur.value("n_a", 0)) + " attention + " + std::to_string(cur.value("n_e", 0)) +
                 " expert devices" + (cur.value("colocated", false) ? " (colocated)" : "") + ", " +
                 cur.value("policy", std::string("?")) + " m=" + std::to_string(cur.value("m", 0)) + ", " +
                 std::to_string(cur.value("max_batch_per_rank", 0)) + " per rank";
  for (const json& p : reply.at("plans")) {
    if (!p.is_object()) return Status::Error("plan reply: a plan is not an object");
    for (const char* key : {"n_a", "tp_a", "n_e", "tp_e", "m", "b_a", "batch", "devices"})
      SY_RETURN_IF_ERROR(need(p, key, &json::is_number_integer, "an integer"));
    for (const char* key : {"tokens_per_s", "token_latency_ms", "tokens_per_s_per_price"})
      SY_RETURN_IF_ERROR(need(p, key, &json::is_number, "a number"));
    SY_RETURN_IF_ERROR(need(p, "applicable", &json::is_boolean, "true or false"));
    PlanRow r;
    r.attention = std::to_string(p.at("n_a").get<std::int32_t>()) + "x tp" + std::to_string(p.at("tp_a").get<std::int32_t>());
    r.experts = std::to_string(p.at("n_e").get<std::int32_t>()) + "x tp" + std::to_string(p.at("tp_e").get<std::int32_t>());
    r.m = p.at("m").get<std::int32_t>();
    r.b_a = p.at("b_a").get<std::int32_t>();
    r.devices = p.at("devices").get<std::int32_t>();
    r.batch = p.at("batch").get<std::int64_t>();
    r.tokens_per_s = p.at("tokens_per_s").get<double>();
    r.ms_per_token = p.at("token_latency_ms").get<double>();
    r.tokens_per_s_per_price = p.at("tokens_per_s_per_price").get<double>();
    r.binding = p.value("binding", "");
    r.applicable = p.at("applicable").get<bool>();
    r.refused = p.value("refused", "");
    r.plan = p;
    list.rows.push_back(std::move(r));
  }
  return list;
}

std::string plan_request(std::int32_t top, double slo_ms) {
  json c = {{"cmd", "plan"}, {"top", top}};
  if (slo_ms > 0) c["slo_ms"] = slo_ms;
  return c.dump();
}

std::string apply_plan_request(const PlanRow& row) {
  // Only the fields apply_plan reads: the shape, not the prediction.
  json plan = json::object();
  for (const char* key : {"n_a", "tp_a", "n_e", "tp_e", "m", "b_a"})
    if (row.plan.contains(key)) plan[key] = row.plan.at(key);
  return json{{"cmd", "apply_plan"}, {"plan", plan}}.dump();
}

}  // namespace sy::console
