// The cuda backend's stop for a failed CUDA call mid-run: the executor and its activation pools
// cannot hand an error back through their interfaces, and results after a failed call would be
// garbage (a broken device, or our bug), so it names the call and aborts.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>

#include "base/status.h"

namespace sy::cuda_backend {

inline void must(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  std::fprintf(stderr, "cuda backend: %s: %s\n", what, cudaGetErrorString(err));
  std::abort();
}

inline void must(const Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "cuda backend: %s\n", s.message().c_str());
  std::abort();
}

}  // namespace sy::cuda_backend
