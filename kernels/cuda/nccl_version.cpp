// nccl_version (cuda_kernels.h): proves the NCCL link and reports which NCCL is loaded.
#include <nccl.h>

#include <stdexcept>
#include <string>

#include "kernels/cuda/cuda_kernels.h"

namespace sy::kernels {

int nccl_version() {
  int version = 0;
  const ncclResult_t result = ncclGetVersion(&version);
  if (result != ncclSuccess) throw std::runtime_error(std::string("ncclGetVersion: ") + ncclGetErrorString(result));
  return version;
}

}  // namespace sy::kernels
