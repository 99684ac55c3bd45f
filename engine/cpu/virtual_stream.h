// A device stream on virtual time: the work runs at once on the loop's thread and completes
// at the time its charged duration says, after the stream's previous work.
#pragma once

#include "engine/cpu/device_stream.h"

namespace sy {

class VirtualStream final : public DeviceStream {
 public:
  explicit VirtualStream(EventLoop& loop) : loop_(loop) {}
  void submit(Work work, Completion done) override;

 private:
  EventLoop& loop_;
  std::int64_t free_at_ = 0;  // when the previous work completes
};

}  // namespace sy
