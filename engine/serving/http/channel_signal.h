// Wakes an HTTP thread that follows several request channels at once (a request for n choices):
// each channel it is given bumps the signal's generation when it has news, so the thread waits
// on one condition variable rather than polling every channel.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace sy::http {

class ChannelSignal {
 public:
  std::uint64_t generation() const;
  void notify();  // loop thread, after a channel's news
  // Waits until the generation differs from `seen`, or for `timeout`.
  void wait(std::uint64_t seen, std::chrono::milliseconds timeout);

 private:
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::uint64_t generation_ = 0;
};

}  // namespace sy::http
