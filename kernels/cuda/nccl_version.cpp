// nccl_version (cuda_kernels.h): proves the NCCL link and reports which NCCL is loaded.
#include <nccl.h>

#include <string>

#include "kernels/cuda/cuda_kernels.h"

namespace sy::kernels {

StatusOr<int> nccl_version() {
  int version = 0;
  const ncclResult_t result = ncclGetVersion(&version);
  if (result != ncclSuccess) return Status::Error(std::string("ncclGetVersion: ") + ncclGetErrorString(result));
  return version;
}

}  // namespace sy::kernels
