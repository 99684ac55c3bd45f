#include "kernels/cpu/dtype.h"

#include <immintrin.h>

#include "kernels/cpu/avx2_math.h"
#include "kernels/cpu/cpu_features.h"

namespace sy::kernels {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
  }
  return "unknown";
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  std::uint32_t bits;
  if (exponent == 0) {
    // Zero or subnormal: mantissa · 2^-24 is exact in float32.
    float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    std::memcpy(&bits, &magnitude, sizeof bits);
    bits |= sign;
  } else if (exponent == 0x1f) {
    // Inf, or NaN made quiet with its payload kept (what F16C's vcvtph2ps does).
    bits = sign | 0x7f800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u);
  } else {
    bits = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

std::uint16_t f32_to_f16(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t magnitude = bits & 0x7fffffffu;
  std::uint32_t h;
  if (magnitude > 0x7f800000u) {
    h = 0x7e00u | ((magnitude >> 13) & 0x3ffu);  // quiet NaN, truncated payload
  } else if (magnitude >= 0x477ff000u) {
    h = 0x7c00u;  // 65520 and above round to infinity (65520 is the tie; 65504 is odd)
  } else if (magnitude >= 0x38800000u) {
    // Normal: round to nearest even on the 13 dropped bits; a carry correctly bumps the exponent.
    h = ((magnitude + 0xfffu + ((magnitude >> 13) & 1u)) >> 13) - (112u << 10);
  } else if (magnitude > 0x33000000u) {
    // Subnormal result: count units of 2^-24, rounding to nearest even. May round up to the
    // smallest normal, whose encoding is exactly the carry into the exponent field.
    const std::uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - (magnitude >> 23);
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t half = 1u << (shift - 1u);
    h = mantissa >> shift;
    if (rest > half || (rest == half && (h & 1u) != 0)) ++h;
  } else {
    h = 0;  // at most 2^-25, which ties to even zero
  }
  return static_cast<std::uint16_t>(sign | h);
}

namespace {

SY_TARGET_AVX2 void bf16_to_f32_avx2(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_bf16(src + i));
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

SY_TARGET_AVX2 void f16_to_f32_avx2(const std::uint16_t* src, float* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, avx2::load_f16(src + i));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

// Same rounding as f32_to_bf16, sixteen at a time.
SY_TARGET_AVX2 __m256i bf16_round(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

SY_TARGET_AVX2 void f32_to_bf16_avx2(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = bf16_round(_mm256_loadu_ps(src + i));
    const __m256i hi = bf16_round(_mm256_loadu_ps(src + i + 8));
    // packus works within 128-bit lanes; the permute puts the halves back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

SY_TARGET_AVX2 void f32_to_f16_avx2(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace

void convert_to_f32(const void* src, DType src_type, float* dst, std::size_t n) {
  const auto* h = static_cast<const std::uint16_t*>(src);
  switch (src_type) {
    case DType::F32:
      std::memmove(dst, src, n * sizeof(float));
      return;
    case DType::BF16:
      if (cpu_has_avx2()) return bf16_to_f32_avx2(h, dst, n);
      for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    case DType::F16:
      if (cpu_has_avx2()) return f16_to_f32_avx2(h, dst, n);
      for (std::size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
      return;
  }
}

void convert_from_f32(const float* src, void* dst, DType dst_type, std::size_t n) {
  auto* h = static_cast<std::uint16_t*>(dst);
  switch (dst_type) {
    case DType::F32:
      std::memmove(dst, src, n * sizeof(float));
      return;
    case DType::BF16:
      if (cpu_has_avx2()) return f32_to_bf16_avx2(src, h, n);
      for (std::size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    case DType::F16:
      if (cpu_has_avx2()) return f32_to_f16_avx2(src, h, n);
      for (std::size_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
      return;
  }
}

}  // namespace sy::kernels
