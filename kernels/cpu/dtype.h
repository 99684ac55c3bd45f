// Element types of weight tensors and the conversions between them and float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace sy::kernels {

enum class DType : std::uint8_t { F32, F16, BF16 };

constexpr std::size_t dtype_size(DType t) { return t == DType::F32 ? 4 : 2; }
std::string_view dtype_name(DType t);

inline float bf16_to_f32(std::uint16_t h) {
  std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as torch does when casting float32 to bfloat16; NaN stays NaN.
inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(bits >> 16);
}

float f16_to_f32(std::uint16_t h);
std::uint16_t f32_to_f16(float f);

// Converts n elements of type `src_type` at `src` to float32 at `dst`.
void convert_to_f32(const void* src, DType src_type, float* dst, std::size_t n);
// Converts n float32 elements to `dst_type` (round to nearest even).
void convert_from_f32(const float* src, void* dst, DType dst_type, std::size_t n);

}  // namespace sy::kernels
