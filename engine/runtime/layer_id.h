// LayerID of AMoE's token metadata: which layer a token goes to next (block + attention rank,
// block + expert, or the sampler after the last block).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace sy {

enum class LayerKind : std::uint8_t { Attention, Expert, Sampler };

struct LayerId {
  LayerKind kind = LayerKind::Attention;
  std::int32_t block = 0;  // Sampler: the number of blocks
  std::int32_t index = 0;  // attention rank, or expert id

  static LayerId attention(std::int32_t block, std::int32_t rank) { return {LayerKind::Attention, block, rank}; }
  static LayerId expert(std::int32_t block, std::int32_t e) { return {LayerKind::Expert, block, e}; }
  static LayerId sampler(std::int32_t num_blocks, std::int32_t rank) { return {LayerKind::Sampler, num_blocks, rank}; }

  bool operator==(const LayerId&) const = default;
  auto operator<=>(const LayerId&) const = default;
  std::string to_string() const;
};

}  // namespace sy

template <>
struct std::hash<sy::LayerId> {
  std::size_t operator()(const sy::LayerId& id) const noexcept {
    return (static_cast<std::size_t>(id.kind) << 60) ^ (static_cast<std::size_t>(id.block) << 30) ^
           static_cast<std::size_t>(id.index);
  }
};
