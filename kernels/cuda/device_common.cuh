// Device helpers shared by the kernels: weight element loads and warp reductions.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace sy::kernels::detail {

__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t h) {
  return __uint_as_float(static_cast<unsigned>(h) << 16);
}

// Element i of a weight vector stored as `type`, widened exactly to float32.
__device__ __forceinline__ float load_weight(const void* w, DType type, std::int64_t i) {
  switch (type) {
    case DType::BF16: return bf16_bits_to_float(static_cast<const std::uint16_t*>(w)[i]);
    case DType::F16: return __half2float(__ushort_as_half(static_cast<const std::uint16_t*>(w)[i]));
    default: return static_cast<const float*>(w)[i];
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace sy::kernels::detail
