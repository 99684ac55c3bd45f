#include "engine/runtime/runtime_policy.h"

#include <sstream>

namespace sy {

std::string policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::Async: return "async";
    case PolicyKind::PingPong: return "pingpong";
    case PolicyKind::Sync: return "sync";
    case PolicyKind::FinDep: return "findep";
  }
  return "?";
}

StatusOr<PolicyKind> parse_policy(const std::string& name) {
  if (name == "async") return PolicyKind::Async;
  if (name == "pingpong") return PolicyKind::PingPong;
  if (name == "sync") return PolicyKind::Sync;
  if (name == "findep") return PolicyKind::FinDep;
  return Status::Error("unknown policy '" + name + "' (expected async, pingpong, sync or findep)");
}

Status validate(const RuntimePolicy& policy) {
  if ((policy.kind == PolicyKind::PingPong || policy.kind == PolicyKind::FinDep) &&
      (policy.microbatches < 1 || policy.microbatches > kMaxMicrobatches))
    return Status::Error("micro-batch count must be in [1, " + std::to_string(kMaxMicrobatches) + "], got " +
                         std::to_string(policy.microbatches));
  if (policy.kind == PolicyKind::FinDep && (policy.expert_chunks < 1 || policy.expert_chunks > kMaxExpertChunks))
    return Status::Error("expert chunk count must be in [1, " + std::to_string(kMaxExpertChunks) + "], got " +
                         std::to_string(policy.expert_chunks));
  if (policy.kind == PolicyKind::Async) {
    auto s = make_scheduler(policy.scheduler);
    if (!s.ok()) return s.status();
  }
  return Status::Ok();
}

StatusOr<RuntimePolicy> runtime_policy(const PolicySpec& spec) {
  SY_RETURN_IF_ERROR(validate_policy(spec));
  const bool adaptive = spec.policy == "adaptive";
  // Adaptive starts synchronous (the low-load choice) until its first window has been observed.
  auto kind = parse_policy(adaptive ? "sync" : spec.policy);
  if (!kind.ok()) return kind.status();
  RuntimePolicy p;
  p.kind = *kind;
  p.scheduler = SchedulerParams{spec.scheduler, spec.lookahead, spec.decay};
  p.microbatches = spec.microbatches;
  p.expert_chunks = spec.expert_chunks;
  p.order = spec.order == "aass" ? SharedExpertOrder::Aass : SharedExpertOrder::Asas;
  p.collective_barrier = spec.barrier == "collective";
  p.gate = spec.gate == "cost";
  p.adaptive = adaptive;
  p.adaptive_pingpong_from = spec.adaptive_pingpong_from;
  p.adaptive_async_from = spec.adaptive_async_from;
  SY_RETURN_IF_ERROR(validate(p));
  return p;
}

PolicySpec policy_spec(const RuntimePolicy& policy) {
  PolicySpec spec;
  spec.policy = policy.adaptive ? "adaptive" : policy_name(policy.kind);
  spec.scheduler = policy.scheduler.name;
  spec.lookahead = policy.scheduler.lookahead;
  spec.decay = policy.scheduler.decay;
  spec.microbatches = policy.microbatches;
  spec.expert_chunks = policy.expert_chunks;
  spec.order = policy.order == SharedExpertOrder::Aass ? "aass" : "asas";
  spec.barrier = policy.collective_barrier ? "collective" : "ideal";
  spec.gate = policy.gate ? "cost" : "off";
  spec.adaptive_pingpong_from = policy.adaptive_pingpong_from;
  spec.adaptive_async_from = policy.adaptive_async_from;
  return spec;
}

std::string RuntimePolicy::describe() const {
  std::ostringstream out;
  if (adaptive) out << "adaptive (now ";
  out << policy_name(kind);
  if (kind == PolicyKind::Async) {
    out << "/" << scheduler.name;
    if (scheduler.name == "defrag") out << " (lookahead " << scheduler.lookahead << ", decay " << scheduler.decay << ")";
    if (gate) out << " gated";  // the default runs every non-empty queue
  }
  if (kind == PolicyKind::Sync && !collective_barrier) out << " (ideal barrier)";
  if (kind == PolicyKind::PingPong) out << " (m=" << microbatches << ")";
  if (kind == PolicyKind::FinDep)
    out << " (r1=" << microbatches << ", r2=" << expert_chunks << ", "
        << (order == SharedExpertOrder::Aass ? "AASS" : "ASAS") << ")";
  if (adaptive) out << ")";
  return out.str();
}

}  // namespace sy
