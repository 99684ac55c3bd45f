// How the cuda backend's tests skip where they cannot run: without a usable GPU (the backend's
// own reason), or with fewer GPUs than a test needs.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "engine/cuda/cuda_deployment.h"

namespace sy {

// GPUs the CUDA runtime sees here (0 without a driver or device).
inline int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

}  // namespace sy

#define SKIP_WITHOUT_GPU()                                                 \
  if (const std::string why = ::sy::cuda_backend_problem(); !why.empty()) { \
    GTEST_SKIP() << "no CUDA device: " << why;                             \
  }
