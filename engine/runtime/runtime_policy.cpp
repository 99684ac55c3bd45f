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
  auto kind = parse_policy(spec.policy);
  if (!kind.ok()) return kind.status();
  RuntimePolicy p;
  p.kind = *kind;
  p.scheduler = SchedulerParams{spec.scheduler, spec.lookahead, spec.decay};
  p.microbatches = spec.microbatches;
  p.expert_chunks = spec.expert_chunks;
  p.order = spec.order == "aass" ? SharedExpertOrder::Aass : SharedExpertOrder::Asas;
  SY_RETURN_IF_ERROR(validate(p));
  return p;
}

PolicySpec policy_spec(const RuntimePolicy& policy) {
  PolicySpec spec;
  spec.policy = policy_name(policy.kind);
  spec.scheduler = policy.scheduler.name;
  spec.lookahead = policy.scheduler.lookahead;
  spec.decay = policy.scheduler.decay;
  spec.microbatches = policy.microbatches;
  spec.expert_chunks = policy.expert_chunks;
  spec.order = policy.order == SharedExpertOrder::Aass ? "aass" : "asas";
  return spec;
}

std::string RuntimePolicy::describe() const {
  std::ostringstream out;
  out << policy_name(kind);
  if (kind == PolicyKind::Async) {
    out << "/" << scheduler.name;
    if (scheduler.name == "defrag") out << " (lookahead " << scheduler.lookahead << ", decay " << scheduler.decay << ")";
  }
  if (kind == PolicyKind::PingPong) out << " (m=" << microbatches << ")";
  if (kind == PolicyKind::FinDep)
    out << " (r1=" << microbatches << ", r2=" << expert_chunks << ", "
        << (order == SharedExpertOrder::Aass ? "AASS" : "ASAS") << ")";
  return out.str();
}

}  // namespace sy
