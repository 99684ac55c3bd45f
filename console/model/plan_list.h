// The Plans view's data: the engine's `plan` reply (docs/control-protocol.md) as table rows,
// and the `plan` / `apply_plan` commands the view sends.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::console {

struct PlanRow {
  std::string attention;  // "4x tp1": nodes × GPUs per node
  std::string experts;
  std::int32_t m = 0, b_a = 0, devices = 0;
  std::int64_t batch = 0;
  double tokens_per_s = 0, ms_per_token = 0, tokens_per_s_per_price = 0;
  std::string binding;
  bool applicable = false;
  std::string refused;   // why not, when not applicable
  nlohmann::json plan;   // the engine's plan object, sent back by apply_plan
};

struct PlanList {
  std::string model;
  std::string hardware;  // "H20 / L40S" (attention / experts)
  std::string current;   // "2 attention + 4 expert devices, pingpong m=2, 64 per rank"
  std::vector<PlanRow> rows;
};

// Parses a successful `plan` reply; the error names what is missing or of the wrong type.
StatusOr<PlanList> parse_plan_reply(const nlohmann::json& reply);

// {"cmd":"plan","top":N} (with "slo_ms" when > 0).
std::string plan_request(std::int32_t top, double slo_ms);
// {"cmd":"apply_plan","plan":{…}} for the row's plan.
std::string apply_plan_request(const PlanRow& row);

}  // namespace sy::console
