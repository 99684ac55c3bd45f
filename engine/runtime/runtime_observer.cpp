#include "engine/runtime/runtime_observer.h"

namespace sy {

std::string_view stall_reason_name(StallReason reason) {
  switch (reason) {
    case StallReason::QueueEmpty: return "queue_empty";
    case StallReason::Barrier: return "barrier";
    case StallReason::Transfer: return "transfer";
    case StallReason::Weights: return "weights";
  }
  return "?";
}

}  // namespace sy
