// cuda_device_available and cuda_device_problem (cuda_kernels.h): whether this process can use a GPU at all.
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_kernels.h"

namespace sy::kernels {

std::string cuda_device_problem() {
  // The device set does not change during a process: ask once. Without a GPU or driver the
  // runtime answers with an error (35, insufficient driver, on our build machines) rather
  // than a count of zero, so every error means "no GPU".
  static const std::string problem = []() -> std::string {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the error so it does not surface in a later, unrelated check
      return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err);
    }
    if (count <= 0) return "no CUDA device present";
    return "";
  }();
  return problem;
}

bool cuda_device_available() { return cuda_device_problem().empty(); }

}  // namespace sy::kernels
