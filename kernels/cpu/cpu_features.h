// Run-time choice between the AVX2 kernels and the portable scalar ones (internal to kernels/cpu).
#pragma once

// Functions carrying this attribute may use AVX2/FMA/F16C intrinsics; they are only ever
// called after cpu_has_avx2() said yes, so the library itself runs on any x86-64.
#define SY_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace sy::kernels {

// True when the CPU and the OS support AVX2, FMA and F16C, unless forced off.
bool cpu_has_avx2();

// Test hook: forces the scalar fallbacks (on = true) so both paths can be checked on one
// machine. Not thread-safe against concurrent kernel calls; set it before running them.
void cpu_force_scalar(bool on);

}  // namespace sy::kernels
