// A non-owning view of a row-major 2-D weight matrix in any supported element type.
#pragma once

#include <cstdint>

#include "kernels/cpu/dtype.h"

namespace sy::kernels {

// Rows are output features, columns input features: the layout of torch.nn.Linear.weight
// ([out, in]), so a linear layer computes y = x · Wᵀ.
struct WeightView {
  const void* data = nullptr;
  DType dtype = DType::F32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;

  bool empty() const { return data == nullptr; }
  std::int64_t numel() const { return rows * cols; }
  // Row r of the matrix, as the raw element pointer.
  const void* row(std::int64_t r) const {
    return static_cast<const char*>(data) + r * cols * static_cast<std::int64_t>(dtype_size(dtype));
  }
};

}  // namespace sy::kernels
