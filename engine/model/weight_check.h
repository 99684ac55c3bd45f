// Finds non-finite values (NaN, ±inf) in a checkpoint's tensors before they turn every logit
// into NaN silently: sampled on every load (cheap), every element on demand.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/model/safetensors.h"

namespace sy {

enum class WeightCheck : std::uint8_t {
  Off,      // trust the file
  Sampled,  // up to kWeightCheckSamples evenly spaced elements of a tensor (the default)
  Full,     // every element (switchyard --check-weights)
};

inline constexpr std::int64_t kWeightCheckSamples = 4096;

// Ok, or an error naming the tensor, its file, the element and the value. A tensor of a dtype
// the model does not compute with (integers, F64, F8) is not searched.
Status check_finite(const TensorInfo& tensor, WeightCheck how);

}  // namespace sy
