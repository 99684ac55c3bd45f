// JobPool: results come back in the order jobs were submitted whatever order they finish in,
// one thread means the caller's thread at get() (the serial order), errors reach the caller.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/util/job_pool.h"

namespace sy {
namespace {

TEST(JobPool, ResultsComeBackInSubmissionOrderWhateverOrderJobsFinishIn) {
  constexpr int kJobs = 4;
  JobPool pool(kJobs);
  ASSERT_EQ(pool.threads(), kJobs);
  // Each job waits for its own gate; the gates open last job first, so the jobs end in the
  // reverse of their order (all run at once: one thread each).
  std::vector<std::promise<void>> gates(kJobs);
  std::vector<std::promise<void>> started(kJobs);
  std::vector<std::future<int>> results;
  std::vector<int> finished;
  std::mutex finished_mutex;
  for (int i = 0; i < kJobs; ++i)
    results.push_back(pool.submit([&, i, gate = gates[static_cast<std::size_t>(i)].get_future()]() mutable {
      started[static_cast<std::size_t>(i)].set_value();
      gate.wait();
      std::lock_guard lock(finished_mutex);
      finished.push_back(i);
      return i * 10;
    }));
  for (auto& s : started) s.get_future().wait();
  for (int i = kJobs - 1; i >= 0; --i) {
    gates[static_cast<std::size_t>(i)].set_value();
    // Wait for job i to be done before opening the next gate: a strict reverse order.
    for (;;) {
      std::lock_guard lock(finished_mutex);
      if (finished.size() == static_cast<std::size_t>(kJobs - i)) break;
    }
  }
  EXPECT_EQ(finished, (std::vector<int>{3, 2, 1, 0}));
  for (int i = 0; i < kJobs; ++i) EXPECT_EQ(results[static_cast<std::size_t>(i)].get(), i * 10);
}

TEST(JobPool, OneThreadRunsEachJobOnTheCallerAtGet) {
  JobPool pool(1);
  EXPECT_EQ(pool.threads(), 0);
  std::vector<int> ran;
  auto a = pool.submit([&] { ran.push_back(1); return std::this_thread::get_id(); });
  auto b = pool.submit([&] { ran.push_back(2); return std::this_thread::get_id(); });
  EXPECT_TRUE(ran.empty()) << "nothing runs before its result is asked for";
  EXPECT_EQ(b.get(), std::this_thread::get_id());
  EXPECT_EQ(a.get(), std::this_thread::get_id());
  EXPECT_EQ(ran, (std::vector<int>{2, 1}));
}

TEST(JobPool, AJobsExceptionReachesTheCaller) {
  for (int threads : {1, 3}) {
    JobPool pool(threads);
    auto bad = pool.submit([]() -> int { throw std::runtime_error("point 3 failed"); });
    auto good = pool.submit([] { return 7; });
    try {
      bad.get();
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "point 3 failed");
    }
    EXPECT_EQ(good.get(), 7) << "the other jobs are not affected";
  }
}

TEST(JobPool, AJobMaySubmitFollowUpJobs) {
  for (int threads : {1, 2}) {
    JobPool pool(threads);
    // A search then the points that depend on its result, the way reproduce's Fig. 11 runs.
    auto outer = pool.submit([&pool] {
      std::vector<std::future<int>> next;
      for (int i = 1; i <= 3; ++i) next.push_back(pool.submit([i] { return i * i; }));
      return next;
    });
    std::vector<std::future<int>> next = outer.get();
    int sum = 0;
    for (auto& f : next) sum += f.get();
    EXPECT_EQ(sum, 14) << threads << " threads";
  }
}

TEST(JobPool, ManySmallJobsAllRunOnce) {
  JobPool pool(3);
  std::atomic<int> runs{0};
  std::vector<std::future<int>> results;
  for (int i = 0; i < 200; ++i) results.push_back(pool.submit([&runs, i] { ++runs; return i; }));
  long sum = 0;
  for (auto& f : results) sum += f.get();
  EXPECT_EQ(sum, 199L * 200 / 2);
  EXPECT_EQ(runs.load(), 200);
}

TEST(JobPool, DefaultThreadsIsAtLeastOne) { EXPECT_GE(JobPool::default_threads(), 1); }

}  // namespace
}  // namespace sy
