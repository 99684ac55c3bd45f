// Reading (memory-mapped) and writing of the safetensors format.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/cpu/dtype.h"

namespace sy {

struct TensorInfo {
  std::string name;
  // Any dtype of the safetensors format is read (a checkpoint may carry integer buffers such as
  // rotary_emb.inv_freq beside its weights); the model computes only with F32, F16 and BF16:
  // `dtype` means something only when `computable`.
  std::string dtype_name;  // as the header spells it: "BF16", "I64", …
  std::size_t element_size = 4;  // bytes, of any dtype
  bool computable = true;
  kernels::DType dtype = kernels::DType::F32;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;  // into the mapping
  std::size_t nbytes = 0;
  std::filesystem::path file;  // the .safetensors file that holds it (for error messages)
};

// One .safetensors file, mapped read-only for the lifetime of the object.
class SafetensorsFile {
 public:
  // Errors name the file: missing, shorter than its header says, header not JSON, a dtype the
  // safetensors format does not define, offsets out of range or overlapping, shape not matching
  // the byte size.
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

// Validates a whole safetensors image of `size` bytes at `bytes` (header and data section) and
// lists its tensors, whose `data` point into the image; `path` names it in errors. open() maps
// a file and calls this; the fuzz target calls it on raw bytes.
StatusOr<std::map<std::string, TensorInfo>> parse_safetensors(const unsigned char* bytes, std::uint64_t size,
                                                              const std::filesystem::path& path);

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

// The same file, with each tensor's bytes produced on demand instead of read from `data` (which
// is ignored): `fill(i, dst, nbytes)` writes the nbytes of tensors[i] into dst. Only one tensor's
// bytes are in memory at a time; an error from `fill` aborts the write and leaves no file.
using TensorFiller = std::function<Status(std::size_t index, void* dst, std::size_t nbytes)>;
Status write_safetensors_streamed(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                                  const TensorFiller& fill);

// "F32", "F16", "BF16": the dtype strings of the safetensors header.
const char* safetensors_dtype_name(kernels::DType dtype);

}  // namespace sy
