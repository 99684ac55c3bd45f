#include "engine/serving/http/channel_signal.h"

namespace sy::http {

std::uint64_t ChannelSignal::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

void ChannelSignal::notify() {
  {
    std::lock_guard lock(mutex_);
    ++generation_;
  }
  cv_.notify_all();
}

void ChannelSignal::wait(std::uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return generation_ != seen; });
}

}  // namespace sy::http
