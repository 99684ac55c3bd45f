// The execution scheme a deployment asks for (policy name and scheduler parameters) as layouts
// and control commands write it, and the one check both go through.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy {

// The most ping-pong micro-batches; one constant so that layout files and control commands
// accept the same range.
inline constexpr std::int32_t kMaxMicrobatches = 64;
// The most findep expert chunks (r2) per micro-batch.
inline constexpr std::int32_t kMaxExpertChunks = 64;

// The execution scheme and its parameters. Every field is kept whatever the policy, so that a
// live switch (e.g. sync -> async) has the scheduler parameters to hand.
struct PolicySpec {
  std::string policy = "async";   // async | pingpong | sync | findep
  std::string scheduler = "defrag";  // defrag | mtfs | flfs (async)
  std::int32_t lookahead = 3;     // defrag: blocks looked ahead (K in AMoE Algorithm 1)
  double decay = 1.0;             // defrag: weight δ^k of the k-th block ahead, 0 < δ ≤ 1
  std::int32_t microbatches = 2;  // pingpong: m micro-batches, 1 ≤ m ≤ kMaxMicrobatches (findep: r1)
  std::int32_t expert_chunks = 2;  // findep: r2 chunks per micro-batch, 1 ≤ r2 ≤ kMaxExpertChunks
  std::string order = "asas";      // findep: shared-expert order, asas | aass (FinDEP §3.2)

  bool operator==(const PolicySpec&) const = default;

  // `changes` is a JSON object with any of the [policy] keys (name, scheduler, lookahead,
  // decay, microbatches, expert_chunks, order), applied over `base`, e.g. a control command's
  // {"name": "pingpong", "microbatches": 4}. Unknown keys, wrong types and out-of-range
  // values are refused with a message naming them; the result is validated.
  static StatusOr<PolicySpec> from_json(const nlohmann::json& changes, const PolicySpec& base);
  static StatusOr<PolicySpec> from_json(const nlohmann::json& changes);  // over the defaults
  nlohmann::json to_json() const;
};

// Checks names and ranges; the message names the bad field and value. Shared by layout files
// and live policy switches so that both accept exactly the same things.
Status validate_policy(const PolicySpec& policy);

}  // namespace sy
