// A device stream on the wall clock: one thread per device runs its work in order, so devices
// compute concurrently; each completion is posted to the loop with the measured interval.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "engine/cpu/device_stream.h"

namespace sy {

class ThreadStream final : public DeviceStream {
 public:
  // kernel_threads: the OpenMP/BLAS threads this device's kernels may use, so that all
  // devices together fit the machine.
  ThreadStream(EventLoop& loop, std::int32_t device, int kernel_threads);
  // Finishes the work already queued, then joins the thread.
  ~ThreadStream() override;
  void submit(Work work, Completion done) override;
  void finish() override;

 private:
  void run();

  EventLoop& loop_;
  const std::int32_t device_;
  const int kernel_threads_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::pair<Work, Completion>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sy
