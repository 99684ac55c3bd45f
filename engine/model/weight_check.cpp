#include "engine/model/weight_check.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/dtype.h"

namespace sy {

Status check_finite(const TensorInfo& tensor, WeightCheck how) {
  // Integers and the float types we do not compute with are never read as weights.
  if (how == WeightCheck::Off || !tensor.computable) return Status::Ok();
  const std::size_t element = kernels::dtype_size(tensor.dtype);
  const auto n = static_cast<std::int64_t>(element > 0 ? tensor.nbytes / element : 0);
  if (n == 0) return Status::Ok();
  const auto* bytes = static_cast<const unsigned char*>(tensor.data);
  const std::int64_t stride = how == WeightCheck::Full ? 1 : std::max<std::int64_t>(1, n / kWeightCheckSamples);
  // Converted in chunks: a full check of a large tensor must not allocate its float copy.
  constexpr std::int64_t kChunk = 1 << 14;
  std::vector<float> values;
  std::vector<unsigned char> gathered;
  for (std::int64_t first = 0; first < n; first += kChunk * stride) {
    const std::int64_t count = std::min<std::int64_t>(kChunk, (n - first + stride - 1) / stride);
    values.resize(static_cast<std::size_t>(count));
    const void* src = bytes + static_cast<std::size_t>(first) * element;
    if (stride > 1) {
      gathered.resize(static_cast<std::size_t>(count) * element);
      for (std::int64_t i = 0; i < count; ++i)
        std::copy_n(bytes + static_cast<std::size_t>(first + i * stride) * element, element,
                    gathered.data() + static_cast<std::size_t>(i) * element);
      src = gathered.data();
    }
    kernels::convert_to_f32(src, tensor.dtype, values.data(), values.size());
    for (std::int64_t i = 0; i < count; ++i) {
      const float v = values[static_cast<std::size_t>(i)];
      if (std::isfinite(v)) continue;
      return Status::Error("tensor '" + tensor.name + "' in " + tensor.file.string() + " holds " +
                           (std::isnan(v) ? std::string("NaN") : std::string(v > 0 ? "+inf" : "-inf")) +
                           " at element " + std::to_string(first + i * stride) + " of " + std::to_string(n) +
                           ": the checkpoint is corrupt");
    }
  }
  // A sampled check always looks at the last element too (truncated writes end there).
  if (stride > 1) {
    float last = 0;
    kernels::convert_to_f32(bytes + static_cast<std::size_t>(n - 1) * element, tensor.dtype, &last, 1);
    if (!std::isfinite(last))
      return Status::Error("tensor '" + tensor.name + "' in " + tensor.file.string() + " holds a non-finite value at element " +
                           std::to_string(n - 1) + " of " + std::to_string(n) + ": the checkpoint is corrupt");
  }
  return Status::Ok();
}

}  // namespace sy
