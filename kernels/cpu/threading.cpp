// set_num_threads / num_threads (declared in gemm.h): one thread count for OpenBLAS and OpenMP.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>

#include "kernels/cpu/gemm.h"

namespace sy::kernels {
namespace {
// omp_set_num_threads only changes the calling thread's setting, but kernels run on the
// engine's worker threads too; so every parallel region names this count explicitly.
std::atomic<int> g_threads{0};  // 0: not set yet, use OpenMP's default
thread_local int t_threads = 0;  // 0: the process-wide count
}  // namespace

void set_num_threads(int n) {
  n = std::max(1, n);
  g_threads.store(n, std::memory_order_relaxed);
  openblas_set_num_threads(n);
  omp_set_num_threads(n);
}

void set_thread_num_threads(int n) {
  t_threads = std::max(1, n);
  omp_set_num_threads(t_threads);
}

int num_threads() {
  if (t_threads > 0) return t_threads;
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : std::max(1, omp_get_max_threads());
}

}  // namespace sy::kernels
