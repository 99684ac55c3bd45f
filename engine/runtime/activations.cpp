#include "engine/runtime/activations.h"

#include "engine/runtime/activation_ops.h"

namespace sy {

void Activations::give_back() {
  owner_->release(storage_, tag_);
  owner_ = nullptr;
  storage_ = nullptr;
  rows_ = 0;
  width_ = 0;
  tag_ = 0;
}

}  // namespace sy
