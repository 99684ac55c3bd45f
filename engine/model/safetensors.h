// Reading (memory-mapped) and writing of the safetensors format.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/common/status.h"
#include "kernels/cpu/dtype.h"

namespace sy {

struct TensorInfo {
  std::string name;
  kernels::DType dtype = kernels::DType::F32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;  // into the mapping
  std::size_t nbytes = 0;
};

// One .safetensors file, mapped read-only for the lifetime of the object.
class SafetensorsFile {
 public:
  // Errors name the file: missing, shorter than its header says, header not JSON, dtype other
  // than F32/F16/BF16, offsets out of range or overlapping, shape not matching the byte size.
  static StatusOr<std::unique_ptr<SafetensorsFile>> open(const std::filesystem::path& path);
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  std::filesystem::path path_;
  void* map_ = nullptr;
  std::size_t map_size_ = 0;
  std::map<std::string, TensorInfo> tensors_;
};

// A tensor to write: raw little-endian bytes in `dtype`.
struct TensorToWrite {
  std::string name;
  kernels::DType dtype = kernels::DType::F32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
};

// Writes a .safetensors file (header with __metadata__ {"format":"pt"}, 8-byte aligned data)
// to a temporary name and renames it into place, so a crash never leaves a half-written file.
Status write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors);

}  // namespace sy
