// Error checks shared by the .cu files: CUDA and cuBLAS failures and bad arguments become
// statuses naming the call and the error, never exceptions.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "base/status.h"
#include "kernels/cuda/cublas_library.h"

namespace sy::kernels::detail {

inline Status check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) return Status::Error(std::string(what) + ": " + cudaGetErrorString(err));
  return Status::Ok();
}

// After a <<<...>>> launch: reports bad launch configurations at once (execution errors
// surface at the next synchronising call, as usual with CUDA).
inline Status check_launch(const char* kernel) { return check_cuda(cudaGetLastError(), kernel); }

inline Status check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) return Status::Error(std::string(what) + ": " + cublas().status_string(status));
  return Status::Ok();
}

// Points the handle at `stream`. cublasSetStream also resets the handle's workspace to
// cuBLAS's default pool (cuBLAS docs, cublasSetStream), which would undo the cublasSetWorkspace
// a CUDA graph capture needs: the stream is switched only when it differs.
inline Status use_stream(cublasHandle_t handle, cudaStream_t stream) {
  cudaStream_t current = nullptr;
  if (cublas().get_stream(handle, &current) == CUBLAS_STATUS_SUCCESS && current == stream) return Status::Ok();
  return check_cublas(cublas().set_stream(handle, stream), "cublasSetStream");
}

inline Status require(bool condition, const char* message) {
  return condition ? Status::Ok() : Status::Error(message);
}

// Blocks needed to cover n items with `per_block` items each, capped for grid-stride loops.
inline unsigned grid_for(long long n, int per_block, long long cap = 65535LL * 32) {
  long long blocks = (n + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks < cap ? blocks : cap);
}

}  // namespace sy::kernels::detail
