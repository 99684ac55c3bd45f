// NumPy .npy files of float32 arrays (the logits exchange format with Python tooling).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "base/status.h"

namespace sy {

struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<float> data;  // C order
};

// Writes a little-endian '<f4' C-order array (format version 1.0), atomically (temp + rename).
Status write_npy(const std::filesystem::path& path, const std::vector<std::int64_t>& shape,
                 const float* data);
// Reads a '<f4' C-order array; other dtypes or Fortran order are errors naming the file.
StatusOr<NpyArray> read_npy(const std::filesystem::path& path);

}  // namespace sy
