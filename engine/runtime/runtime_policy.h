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
  // sync: the barrier is an all-to-all collective with its latency, and every iteration pays
  // the host's scheduling (priced by the executor: the sim's cost model; real backends pay
  // them for real). False: an ideal, free barrier.
  bool collective_barrier = true;
  // async: expert μ-queues below the cost model's minimum batch wait up to its maximum wait
  // (MuQueueGate). False: any non-empty queue may run.
  bool gate = false;
  // The coordinator picks kind (sync, pingpong or async) live from the observed load
  // (AdaptiveChooser); the workers only ever see the concrete policy.
  bool adaptive = false;
  double adaptive_pingpong_from = 1e9;  // PolicySpec's thresholds (offered tok/s per attention rank)
  double adaptive_async_from = 1e9;

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
// "async" | "pingpong" | "sync" | "findep"; the message names an unknown policy. ("adaptive" is
// no kind of its own: runtime_policy() turns it into a concrete kind with `adaptive` set.)
StatusOr<PolicyKind> parse_policy(const std::string& name);
// Checks the scheduler and the micro-batch count; the message names the bad value.
Status validate(const RuntimePolicy& policy);

}  // namespace sy
