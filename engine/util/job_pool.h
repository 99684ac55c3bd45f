// A fixed set of threads that run independent jobs (whole simulations of a study) and hand each
// result back through a future, so that the caller can consume, print and account the results
// in the order it submitted them: output and results do not depend on the number of threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace sy {

class JobPool {
 public:
  // threads <= 1: no thread at all; a job runs on the caller's thread when its result is first
  // asked for (std::launch::deferred), so --jobs 1 keeps the serial order of work exactly.
  explicit JobPool(int threads);
  // Drops the jobs that have not started and waits for the ones running (a job that must stop
  // early checks a flag of its own: a simulation is not interruptible from outside).
  ~JobPool();
  JobPool(const JobPool&) = delete;
  JobPool& operator=(const JobPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()); }

  // Queues `job` (first in, first out). Safe from any thread, including from inside a job (a
  // job may submit follow-up jobs and return their futures; it must not wait on them, or the
  // pool can run out of threads). An exception the job throws comes out of the future's get().
  template <class F>
  std::future<std::invoke_result_t<F>> submit(F job) {
    using R = std::invoke_result_t<F>;
    if (workers_.empty()) return std::async(std::launch::deferred, std::move(job));
    // std::function needs a copyable callable: the task lives behind a shared_ptr.
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(job));
    std::future<R> result = task->get_future();
    {
      std::lock_guard lock(mutex_);
      queue_.emplace_back([task] { (*task)(); });
    }
    wake_.notify_one();
    return result;
  }

  // The default --jobs: the hardware's thread count (1 when the library cannot tell).
  static int default_threads();

 private:
  void work();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace sy
