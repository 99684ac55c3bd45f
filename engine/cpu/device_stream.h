// Where one device's executions run, in submission order, and how each one's completion gets
// back to the event loop: at once on virtual time, or from a thread of the device's own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "engine/runtime/completion.h"
#include "engine/runtime/event_loop.h"

namespace sy {

class DeviceStream {
 public:
  // The work runs the math (or nothing) and returns the duration the backend charges for it in
  // ns: what a cost model says, or what it measured. Only virtual time uses it.
  using Work = std::function<std::int64_t()>;
  virtual ~DeviceStream() = default;
  // Queues `work` after everything submitted before; `done` runs on the loop's thread once it
  // has finished, never inside submit().
  virtual void submit(Work work, Completion done) = 0;
  // Returns once the work submitted so far has run; nothing may be submitted after.
  virtual void finish() {}
};

// The stream a device gets on `loop`: a VirtualStream on virtual time, a ThreadStream on the
// wall clock whose thread runs its kernels with `kernel_threads` threads.
std::unique_ptr<DeviceStream> make_device_stream(EventLoop& loop, std::int32_t device, int kernel_threads);

}  // namespace sy
