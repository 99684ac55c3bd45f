#include "engine/util/job_pool.h"

namespace sy {

JobPool::JobPool(int threads) {
  if (threads <= 1) return;
  workers_.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
}

JobPool::~JobPool() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    dropped.swap(queue_);  // their futures report broken_promise to anyone still holding one
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void JobPool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();  // a packaged_task: what it throws lands in its future
  }
}

int JobPool::default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

}  // namespace sy
