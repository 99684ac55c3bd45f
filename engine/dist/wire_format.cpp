#include "engine/dist/wire_format.h"

namespace sy::dist {

void put_policy(ByteWriter& w, const RuntimePolicy& policy) {
  w.put<std::uint8_t>(static_cast<std::uint8_t>(policy.kind));
  w.put<std::int32_t>(policy.microbatches);
  w.put_string(policy.scheduler.name);
  w.put<std::int32_t>(policy.scheduler.lookahead);
  w.put<double>(policy.scheduler.decay);
  w.put<std::int32_t>(policy.expert_chunks);
  w.put<std::uint8_t>(static_cast<std::uint8_t>(policy.order));
  w.put<std::uint8_t>(static_cast<std::uint8_t>((policy.collective_barrier ? 1 : 0) | (policy.gate ? 2 : 0) |
                                                (policy.adaptive ? 4 : 0)));
}

Status get_policy(ByteReader& r, RuntimePolicy& policy) {
  std::uint8_t kind = 0;
  SY_RETURN_IF_ERROR(r.get(kind));
  if (kind > static_cast<std::uint8_t>(PolicyKind::FinDep)) return Status::Error("unknown policy kind " + std::to_string(kind));
  policy.kind = static_cast<PolicyKind>(kind);
  SY_RETURN_IF_ERROR(r.get(policy.microbatches));
  SY_RETURN_IF_ERROR(r.get_string(policy.scheduler.name));
  SY_RETURN_IF_ERROR(r.get(policy.scheduler.lookahead));
  SY_RETURN_IF_ERROR(r.get(policy.scheduler.decay));
  SY_RETURN_IF_ERROR(r.get(policy.expert_chunks));
  std::uint8_t order = 0;
  SY_RETURN_IF_ERROR(r.get(order));
  if (order > static_cast<std::uint8_t>(SharedExpertOrder::Aass)) return Status::Error("unknown shared-expert order " + std::to_string(order));
  policy.order = static_cast<SharedExpertOrder>(order);
  std::uint8_t flags = 0;
  SY_RETURN_IF_ERROR(r.get(flags));
  if (flags > 7) return Status::Error("unknown policy flags " + std::to_string(flags));
  policy.collective_barrier = (flags & 1) != 0;
  policy.gate = (flags & 2) != 0;
  policy.adaptive = (flags & 4) != 0;
  return validate(policy);
}

void put_placement(ByteWriter& w, const Placement& placement) {
  w.put<std::int32_t>(placement.num_blocks());
  w.put<std::int32_t>(placement.num_experts());
  for (std::int32_t b = 0; b < placement.num_blocks(); ++b) {
    if (!placement.is_sparse(b)) continue;
    for (std::int32_t e = 0; e < placement.num_experts(); ++e) w.put_array(placement.devices(b, e));
  }
}

Status get_placement(ByteReader& r, const Placement& shape, Placement& placement) {
  std::int32_t blocks = 0, experts = 0;
  SY_RETURN_IF_ERROR(r.get(blocks));
  SY_RETURN_IF_ERROR(r.get(experts));
  if (blocks != shape.num_blocks() || experts != shape.num_experts())
    return Status::Error("placement for " + std::to_string(blocks) + " blocks and " + std::to_string(experts) +
                         " experts; the model has " + std::to_string(shape.num_blocks()) + " and " +
                         std::to_string(shape.num_experts()));
  std::vector<bool> sparse;
  for (std::int32_t b = 0; b < blocks; ++b) sparse.push_back(shape.is_sparse(b));
  placement = Placement(blocks, experts, sparse);
  for (std::int32_t b = 0; b < blocks; ++b) {
    if (!sparse[static_cast<std::size_t>(b)]) continue;
    for (std::int32_t e = 0; e < experts; ++e) {
      std::vector<std::int32_t> devices;
      SY_RETURN_IF_ERROR(r.get_array(devices));
      SY_RETURN_IF_ERROR(placement.set(b, e, std::move(devices)));
    }
  }
  return Status::Ok();
}

std::uint64_t digest(std::string_view bytes, std::uint64_t seed) {
  std::uint64_t h = seed;
  for (const char c : bytes) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace sy::dist
