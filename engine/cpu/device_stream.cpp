#include "engine/cpu/device_stream.h"

#include "engine/cpu/thread_stream.h"
#include "engine/cpu/virtual_stream.h"

namespace sy {

std::unique_ptr<DeviceStream> make_device_stream(EventLoop& loop, std::int32_t device, int kernel_threads) {
  if (loop.virtual_time()) return std::make_unique<VirtualStream>(loop);
  return std::make_unique<ThreadStream>(loop, device, kernel_threads);
}

}  // namespace sy
