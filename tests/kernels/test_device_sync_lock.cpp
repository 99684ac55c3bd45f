// The cuda backend's allocating and freeing calls wait while NCCL launches a group (the lock
// that keeps NVIDIA/nccl#750's hang away). Runs without a GPU: cudaFree(nullptr) returns at
// once, with an error where there is no device, and only the waiting is checked.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "kernels/cuda/device_sync_lock.h"

namespace sy::kernels {
namespace {

TEST(DeviceSyncLock, FreeingWaitsForTheLockHolder) {
  locked_free(nullptr);  // the CUDA runtime's first call initialises it, which may be slow
  std::atomic<bool> freed{false};
  std::unique_lock held(device_sync_mutex());
  std::thread other([&] {
    locked_free(nullptr);
    locked_free_host(nullptr);
    freed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(freed.load()) << "cudaFree ran while the lock was held";
  held.unlock();
  other.join();
  EXPECT_TRUE(freed.load());
}

TEST(DeviceSyncLock, NotHeldAfterACall) {
  void* p = nullptr;
  locked_malloc(&p, 16);  // fails without a GPU; the lock must be released either way
  locked_free(p);
  locked_malloc_host(&p, 16);
  locked_free_host(p);
  EXPECT_TRUE(device_sync_mutex().try_lock());
  device_sync_mutex().unlock();
}

}  // namespace
}  // namespace sy::kernels
