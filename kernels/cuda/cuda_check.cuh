// Error checks shared by the .cu files: CUDA and cuBLAS failures become std::runtime_error.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace sy::kernels::detail {

inline void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// After a <<<...>>> launch: reports bad launch configurations at once (execution errors
// surface at the next synchronising call, as usual with CUDA).
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

inline void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(status));
}

inline void require(bool condition, const char* message) {
  if (!condition) throw std::invalid_argument(message);
}

// Blocks needed to cover n items with `per_block` items each, capped for grid-stride loops.
inline unsigned grid_for(long long n, int per_block, long long cap = 65535LL * 32) {
  long long blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

}  // namespace sy::kernels::detail
