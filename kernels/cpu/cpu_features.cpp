#include "kernels/cpu/cpu_features.h"

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace sy::kernels {
namespace {

bool detect_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // __builtin_cpu_supports checks OS (XSAVE) support for AVX state as well; F16C is not a
  // feature name every compiler accepts there, so read CPUID.1:ECX bit 29 directly.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}

std::atomic<bool> g_forced_scalar{false};

}  // namespace

bool cpu_has_avx2() {
  static const bool supported = detect_avx2();
  return supported && !g_forced_scalar.load(std::memory_order_relaxed);
}

void cpu_force_scalar(bool on) { g_forced_scalar.store(on, std::memory_order_relaxed); }

}  // namespace sy::kernels
