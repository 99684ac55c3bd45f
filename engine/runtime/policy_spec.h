// The execution scheme a deployment asks for (policy name and scheduler parameters) as layouts
// and control commands write it, and the one check both go through.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy {

// The most ping-pong micro-batches; one constant so that layout files and control commands
// accept the same range.
inline constexpr std::int32_t kMaxMicrobatches = 64;
// The most findep expert chunks (r2) per micro-batch.
inline constexpr std::int32_t kMaxExpertChunks = 64;
// The most blocks defrag looks ahead (K; the paper's is 3): each pick costs K per waiting block,
// so an unbounded K from a control command or a peer could stall the engine or exhaust memory.
inline constexpr std::int32_t kMaxLookahead = 1024;

// The execution scheme and its parameters. Every field is kept whatever the policy, so that a
// live switch (e.g. sync -> async) has the scheduler parameters to hand.
struct PolicySpec {
  // async | pingpong | sync | findep | adaptive (the coordinator picks sync, pingpong or async
  // live from the load it observes; see engine/serving/adaptive_chooser.h)
  std::string policy = "async";
  std::string scheduler = "defrag";  // defrag | mtfs | flfs | tail (async)
  std::int32_t lookahead = 3;     // defrag: blocks looked ahead (K in AMoE Algorithm 1)
  double decay = 1.0;             // defrag: weight δ^k of the k-th block ahead, 0 < δ ≤ 1
  std::int32_t microbatches = 2;  // pingpong: m micro-batches, 1 ≤ m ≤ kMaxMicrobatches (findep: r1)
  std::int32_t expert_chunks = 2;  // findep: r2 chunks per micro-batch, 1 ≤ r2 ≤ kMaxExpertChunks
  std::string order = "asas";      // findep: shared-expert order, asas | aass (FinDEP §3.2)
  // sync: "collective" pays what the systems AMoE compares against pay (a per-block all-to-all
  // collective's latency and host scheduling per iteration; the sim prices both, real backends
  // pay them for real); "ideal" is a free barrier, the lower bound of any synchronous engine.
  std::string barrier = "collective";
  // async: "cost" holds back a μ-queue below the cost model's minimum batch until its oldest
  // row has waited the maximum wait (engine/runtime/mu_queue_gate.h); "off" (the default: on
  // the sim the gate measured slower, README) runs any non-empty queue the scheduler picks.
  std::string gate = "off";
  // adaptive: the offered load (output tokens/s that arriving requests ask for, per attention
  // rank) from which pingpong, and from which async, replace sync (AdaptiveThresholds). The
  // defaults are calibrated on the demo's cluster (README: the load sweep).
  double adaptive_pingpong_from = 1e9;
  double adaptive_async_from = 1e9;

  bool operator==(const PolicySpec&) const = default;

  // `changes` is a JSON object with any of the [policy] keys (name, scheduler, lookahead,
  // decay, microbatches, expert_chunks, order, barrier, gate, adaptive_pingpong_from,
  // adaptive_async_from), applied over `base`, e.g. a control command's
  // {"name": "pingpong", "microbatches": 4}. Unknown keys, wrong types and out-of-range
  // values are refused with a message naming them; the result is validated.
  static StatusOr<PolicySpec> from_json(const nlohmann::json& changes, const PolicySpec& base);
  static StatusOr<PolicySpec> from_json(const nlohmann::json& changes);  // over the defaults
  nlohmann::json to_json() const;
};

// Checks names and ranges; the message names the bad field and value. Shared by layout files
// and live policy switches so that both accept exactly the same things.
Status validate_policy(const PolicySpec& policy);
// The range of one of the [policy] numbers (decay, adaptive_pingpong_from, adaptive_async_from)
// as validate_policy checks it, the message naming `key`: for a parser that reports it on the
// key's own line.
Status validate_policy_number(std::string_view key, double value);

}  // namespace sy
