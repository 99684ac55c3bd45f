// The execution scheme of the workers: when a μ-queue may be drained and which one first.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/runtime/policy_spec.h"
#include "engine/runtime/scheduler.h"

namespace sy {

enum class PolicyKind : std::uint8_t {
  Async,     // AMoE: no barriers; the scheduler picks any non-empty queue
  PingPong,  // MegaScale-Infer: m micro-batches; a layer drains one complete micro-batch
  Sync,      // today's engines: one batch per iteration, every layer waits for all of it
  FinDep,    // FinDEP: pingpong's r1 = m micro-batches, each expert step cut into r2 chunks
};

// Where findep runs each micro-batch's shared expert on the attention side (FinDEP §3.2):
// ASAS right after the micro-batch's attention, AASS once no attention is ready to run.
enum class SharedExpertOrder : std::uint8_t { Asas, Aass };

struct RuntimePolicy {
  PolicyKind kind = PolicyKind::Async;
  SchedulerParams scheduler;     // async
  std::int32_t microbatches = 2;  // pingpong, findep (r1)
  std::int32_t expert_chunks = 2;  // findep: r2 chunks of each micro-batch's A2E, experts and E2A
  SharedExpertOrder order = SharedExpertOrder::Asas;  // findep

  // Micro-batches in flight per iteration: m for pingpong and findep, 1 for sync, 0 (none) for async.
  std::int32_t groups() const {
    return kind == PolicyKind::PingPong || kind == PolicyKind::FinDep ? microbatches : kind == PolicyKind::Sync ? 1 : 0;
  }
  // Chunks each micro-batch's expert step is cut into (findep's r2; 1 otherwise).
  std::int32_t chunks() const { return kind == PolicyKind::FinDep ? expert_chunks : 1; }
  bool grouped() const { return kind != PolicyKind::Async; }
  // findep runs the shared expert as a task of its own; other policies inside attention.
  bool shared_expert_apart() const { return kind == PolicyKind::FinDep; }
  std::string describe() const;
};

// The runtime form of a layout's (or a control command's) policy section.
StatusOr<RuntimePolicy> runtime_policy(const PolicySpec& spec);
// And back: the policy section that runtime_policy() turns into `policy`.
PolicySpec policy_spec(const RuntimePolicy& policy);

std::string policy_name(PolicyKind kind);
// "async" | "pingpong" | "sync" | "findep"; the message names an unknown policy.
StatusOr<PolicyKind> parse_policy(const std::string& name);
// Checks the scheduler and the micro-batch count; the message names the bad value.
Status validate(const RuntimePolicy& policy);

}  // namespace sy
