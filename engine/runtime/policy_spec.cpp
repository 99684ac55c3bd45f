#include "engine/runtime/policy_spec.h"

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <string_view>

#include "engine/runtime/config_text.h"

namespace sy {
namespace {

constexpr std::string_view kPolicies[] = {"async", "pingpong", "sync", "findep", "adaptive"};
constexpr std::string_view kSchedulers[] = {"defrag", "mtfs", "flfs", "tail"};
constexpr std::string_view kOrders[] = {"asas", "aass"};
constexpr std::string_view kBarriers[] = {"collective", "ideal"};
constexpr std::string_view kGates[] = {"cost", "off"};

}  // namespace

Status validate_policy_number(std::string_view key, double value) {
  // Written so that NaN fails too.
  if (key == "decay") {
    if (!(value > 0.0 && value <= 1.0)) return Status::Error("decay must be in (0, 1], got " + format_double(value));
  } else if (!(value >= 0.0)) {
    return Status::Error(std::string(key) + " must be >= 0, got " + format_double(value));
  }
  return Status::Ok();
}

Status validate_policy(const PolicySpec& p) {
  if (std::ranges::find(kPolicies, p.policy) == std::end(kPolicies))
    return Status::Error("unknown policy '" + p.policy + "' (expected " + one_of({"async", "pingpong", "sync", "findep", "adaptive"}) + ")");
  if (std::ranges::find(kSchedulers, p.scheduler) == std::end(kSchedulers))
    return Status::Error("unknown scheduler '" + p.scheduler + "' (expected " + one_of({"defrag", "mtfs", "flfs", "tail"}) +
                         ")");
  if (std::ranges::find(kBarriers, p.barrier) == std::end(kBarriers))
    return Status::Error("unknown barrier '" + p.barrier + "' (expected " + one_of({"collective", "ideal"}) + ")");
  if (std::ranges::find(kGates, p.gate) == std::end(kGates))
    return Status::Error("unknown gate '" + p.gate + "' (expected " + one_of({"cost", "off"}) + ")");
  if (!validate_policy_number("adaptive_pingpong_from", p.adaptive_pingpong_from).ok() ||
      !validate_policy_number("adaptive_async_from", p.adaptive_async_from).ok())
    return Status::Error("adaptive_pingpong_from and adaptive_async_from must be >= 0, got " +
                         format_double(p.adaptive_pingpong_from) + " and " + format_double(p.adaptive_async_from));
  if (p.lookahead < 0 || p.lookahead > kMaxLookahead)
    return Status::Error("lookahead must be in [0, " + std::to_string(kMaxLookahead) + "], got " +
                         std::to_string(p.lookahead));
  SY_RETURN_IF_ERROR(validate_policy_number("decay", p.decay));
  if (p.microbatches < 1 || p.microbatches > kMaxMicrobatches)
    return Status::Error("microbatches must be in [1, " + std::to_string(kMaxMicrobatches) + "], got " +
                         std::to_string(p.microbatches));
  if (p.expert_chunks < 1 || p.expert_chunks > kMaxExpertChunks)
    return Status::Error("expert_chunks must be in [1, " + std::to_string(kMaxExpertChunks) + "], got " +
                         std::to_string(p.expert_chunks));
  if (std::ranges::find(kOrders, p.order) == std::end(kOrders))
    return Status::Error("unknown order '" + p.order + "' (expected " + one_of({"asas", "aass"}) + ")");
  return Status::Ok();
}

StatusOr<PolicySpec> PolicySpec::from_json(const nlohmann::json& changes, const PolicySpec& base) {
  if (!changes.is_object()) return Status::Error("policy: expected a JSON object, got " + changes.dump());
  PolicySpec p = base;
  const auto read_int = [](const nlohmann::json& v, const std::string& key) -> StatusOr<std::int32_t> {
    constexpr auto kMax = std::numeric_limits<std::int32_t>::max();
    constexpr auto kMin = std::numeric_limits<std::int32_t>::min();
    if (!v.is_number_integer()) return Status::Error("policy: " + key + " must be an integer, got " + v.dump());
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax)
                               : (v.get<std::int64_t>() > kMax || v.get<std::int64_t>() < kMin))
      return Status::Error("policy: " + key + " is out of range: " + v.dump());
    return static_cast<std::int32_t>(v.get<std::int64_t>());
  };
  for (const auto& [key, value] : changes.items()) {
    if (key == "name" || key == "scheduler" || key == "order" || key == "barrier" || key == "gate") {
      if (!value.is_string()) return Status::Error("policy: " + key + " must be a string, got " + value.dump());
      (key == "name"        ? p.policy
       : key == "scheduler" ? p.scheduler
       : key == "order"     ? p.order
       : key == "barrier"   ? p.barrier
                            : p.gate) = value.get<std::string>();
    } else if (key == "lookahead" || key == "microbatches" || key == "expert_chunks") {
      auto v = read_int(value, key);
      if (!v.ok()) return v.status();
      (key == "lookahead" ? p.lookahead : key == "microbatches" ? p.microbatches : p.expert_chunks) = *v;
    } else if (key == "decay" || key == "adaptive_pingpong_from" || key == "adaptive_async_from") {
      if (!value.is_number()) return Status::Error("policy: " + key + " must be a number, got " + value.dump());
      (key == "decay" ? p.decay : key == "adaptive_pingpong_from" ? p.adaptive_pingpong_from : p.adaptive_async_from) =
          value.get<double>();
    } else {
      const std::initializer_list<std::string_view> kKeys = {
          "name",    "scheduler", "lookahead", "decay",  "microbatches",           "expert_chunks",
          "order",   "barrier",   "gate",      "adaptive_pingpong_from", "adaptive_async_from"};
      return Status::Error("policy: unknown key '" + key + "' (expected " + one_of(kKeys) + ")" +
                           did_you_mean(key, kKeys));
    }
  }
  Status s = validate_policy(p);
  if (!s.ok()) return Status::Error("policy: " + s.message());
  return p;
}

StatusOr<PolicySpec> PolicySpec::from_json(const nlohmann::json& changes) {
  return from_json(changes, PolicySpec{});
}

nlohmann::json PolicySpec::to_json() const {
  return {{"name", policy},
          {"scheduler", scheduler},
          {"lookahead", lookahead},
          {"decay", decay},
          {"microbatches", microbatches},
          {"expert_chunks", expert_chunks},
          {"order", order},
          {"barrier", barrier},
          {"gate", gate},
          {"adaptive_pingpong_from", adaptive_pingpong_from},
          {"adaptive_async_from", adaptive_async_from}};
}

}  // namespace sy
