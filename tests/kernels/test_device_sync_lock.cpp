// The gate between NCCL transfers and the cuda backend's device-wide calls (allocation and
// release), which keeps NVIDIA/nccl#750's hang away. Runs without a GPU: cudaFree(nullptr)
// returns at once, with an error where there is no device, and only the waiting is checked.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "kernels/cuda/device_sync_lock.h"

namespace sy::kernels {
namespace {

void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(100)); }

TEST(DeviceSyncGate, FreeingWaitsForEveryTransferInFlight) {
  locked_free(nullptr);  // the CUDA runtime's first call initialises it, which may be slow
  std::atomic<bool> freed{false};
  auto first = std::make_unique<NcclInFlight>();
  auto second = std::make_unique<NcclInFlight>();  // transfers overlap one another
  EXPECT_EQ(nccl_transfers_in_flight(), 2);
  std::thread other([&] {
    locked_free(nullptr);
    locked_free_host(nullptr);
    freed = true;
  });
  settle();
  EXPECT_FALSE(freed.load()) << "cudaFree ran while NCCL transfers were in flight";
  first.reset();
  settle();
  EXPECT_FALSE(freed.load()) << "cudaFree ran while an NCCL transfer was in flight";
  second.reset();
  other.join();
  EXPECT_TRUE(freed.load());
  EXPECT_EQ(nccl_transfers_in_flight(), 0);
  EXPECT_FALSE(device_wide_call_running());
}

TEST(DeviceSyncGate, ATransferWaitsOnlyWhileADeviceWideCallRuns) {
  // A waiting cudaFree does not hold a new transfer back (that would let two processes' frees,
  // each waiting on the other's transfer, deadlock): only a running one does.
  auto held = std::make_unique<NcclInFlight>();
  std::atomic<bool> freed{false};
  std::thread freeing([&] {
    locked_free(nullptr);
    freed = true;
  });
  settle();
  ASSERT_FALSE(freed.load());
  std::atomic<bool> entered{false};
  std::thread transfer([&] {
    NcclInFlight another;
    entered = true;
  });
  transfer.join();
  EXPECT_TRUE(entered.load());
  held.reset();
  freeing.join();
  EXPECT_TRUE(freed.load());
}

TEST(DeviceSyncGate, NothingHeldAfterACall) {
  void* p = nullptr;
  locked_malloc(&p, 16);  // fails without a GPU; the gate must open again either way
  locked_free(p);
  locked_malloc_host(&p, 16);
  locked_free_host(p);
  EXPECT_FALSE(device_wide_call_running());
  EXPECT_EQ(nccl_transfers_in_flight(), 0);
  { NcclInFlight t; }
  EXPECT_EQ(nccl_transfers_in_flight(), 0);
}

}  // namespace
}  // namespace sy::kernels
