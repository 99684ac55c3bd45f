// How an execution's end reaches its worker: the backend calls a Completion on the worker's
// event loop once the work has finished on the device, with the interval it occupied there.
#pragma once

#include <cstdint>
#include <functional>

namespace sy {

// When an execution ran on its device, on the event loop's time base (sim and virtual cpu:
// the modelled or measured duration after its start; cpu on the wall clock: the interval its
// device thread measured; cuda: the device's own events).
struct ExecutionTiming {
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

using Completion = std::function<void(ExecutionTiming)>;

}  // namespace sy
