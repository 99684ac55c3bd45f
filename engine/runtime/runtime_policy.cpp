#include "engine/runtime/runtime_policy.h"

#include <sstream>

namespace sy {

std::string policy_name(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::Async: return "async";
    case PolicyKind::PingPong: return "pingpong";
    case PolicyKind::Sync: return "sync";
  }
  return "?";
}

StatusOr<PolicyKind> parse_policy(const std::string& name) {
  if (name == "async") return PolicyKind::Async;
  if (name == "pingpong") return PolicyKind::PingPong;
  if (name == "sync") return PolicyKind::Sync;
  return Status::Error("unknown policy '" + name + "' (expected async, pingpong or sync)");
}

Status validate(const RuntimePolicy& policy) {
  if (policy.kind == PolicyKind::PingPong && (policy.microbatches < 1 || policy.microbatches > 64))
    return Status::Error("micro-batch count must be in [1, 64], got " + std::to_string(policy.microbatches));
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
  return out.str();
}

}  // namespace sy
