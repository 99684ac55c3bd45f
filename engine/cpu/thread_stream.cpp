#include "engine/cpu/thread_stream.h"

#include <pthread.h>

#include <string>

#include "kernels/cpu/gemm.h"

namespace sy {

ThreadStream::ThreadStream(EventLoop& loop, std::int32_t device, int kernel_threads)
    : loop_(loop), device_(device), kernel_threads_(kernel_threads < 1 ? 1 : kernel_threads) {
  thread_ = std::thread([this] { run(); });
}

ThreadStream::~ThreadStream() { finish(); }

void ThreadStream::finish() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ThreadStream::submit(Work work, Completion done) {
  // The loop must not finish its run while this is on the device.
  loop_.begin_outside_work();
  {
    std::lock_guard lock(mutex_);
    queue_.emplace_back(std::move(work), std::move(done));
  }
  cv_.notify_one();
}

void ThreadStream::run() {
  const std::string name = "sy-dev" + std::to_string(device_);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
  kernels::set_thread_num_threads(kernel_threads_);
  for (;;) {
    std::pair<Work, Completion> item;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    ExecutionTiming timing;
    timing.start_ns = loop_.now();
    item.first();
    timing.end_ns = loop_.now();
    // Captures the loop, not the stream: the loop outlives the devices' streams.
    loop_.post_external([loop = &loop_, done = std::move(item.second), timing] {
      loop->end_outside_work();
      done(timing);
    });
  }
}

}  // namespace sy
