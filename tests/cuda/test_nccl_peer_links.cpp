// NCCL between ranks (NcclPeerLinks), two ranks as threads of this process on GPUs 0 and 1: the
// unique ids rank 0 makes join both ends, and rows go both ways at once, each direction's
// batches landing in the order sent, bit for bit. Ranks sharing a GPU get no link. Skips
// without a GPU (or 2 GPUs where NCCL must run), saying so.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "engine/cuda/cuda_activation_ops.h"
#include "engine/cuda/cuda_deployment.h"
#include "engine/cuda/nccl_peer_links.h"
#include "tests/cuda/gpu_skips.h"

namespace sy {
namespace {

std::vector<float> read(const Activations& a) {
  std::vector<float> v(static_cast<std::size_t>(a.rows() * a.width()));
  EXPECT_EQ(cudaMemcpy(v.data(), CudaActivationOps::data(a), v.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

std::vector<float> values(std::int64_t n, float first) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(NcclPeerLinks, RanksSharingAGpuGetNoLink) {
  SKIP_WITHOUT_GPU();
  NcclPeerLinks a(0, 30), b(0, 30);
  const std::vector<std::string> memories = {a.memory(), b.memory()};
  EXPECT_EQ(memories[0].rfind("GPU-", 0), 0u) << memories[0];
  EXPECT_EQ(memories[0], memories[1]);
  auto setup = a.setup(memories);
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  EXPECT_TRUE(setup->empty());
  EXPECT_TRUE(a.connect(0, memories, *setup).ok());
  EXPECT_TRUE(b.connect(1, memories, *setup).ok());
  EXPECT_FALSE(a.linked(1));
  EXPECT_FALSE(b.linked(0));
}

// Without a GPU: a rank 0 running no device (a layout whose devices are all on other ranks)
// still makes the ids of the pairs between the others, whose join would fail without them,
// and joins none itself.
TEST(NcclPeerLinks, ARankWithoutDevicesMakesTheIdsAndJoinsNoPair) {
  NcclPeerLinks none(-1, 30);
  EXPECT_EQ(none.memory(), "");
  const std::vector<std::string> memories = {none.memory(), "GPU-00000000-0000-0000-0000-000000000001",
                                             "GPU-00000000-0000-0000-0000-000000000002"};
  auto setup = none.setup(memories);
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  EXPECT_EQ(setup->size(), 2u * NCCL_UNIQUE_ID_BYTES);  // 1 -> 2 and 2 -> 1
  const Status joined = none.connect(0, memories, *setup);
  EXPECT_TRUE(joined.ok()) << joined.message();
  EXPECT_FALSE(none.linked(1));
  EXPECT_FALSE(none.linked(2));
}

// A rank whose pair's other end never joins (it died after the bootstrap) gives up after the
// bootstrap timeout with an error naming that rank, instead of hanging in ncclCommInitRank.
TEST(NcclPeerLinks, AJoinWhosePeerNeverComesFailsNamingItAfterTheTimeout) {
  SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL between ranks); this machine has " << gpu_count();
  NcclPeerLinks zero(0, 1.0), one(1, 1.0);
  const std::vector<std::string> memories = {zero.memory(), one.memory()};
  auto setup = zero.setup(memories);
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  const auto start = std::chrono::steady_clock::now();
  const Status joined = zero.connect(0, memories, *setup);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(joined.ok());
  EXPECT_NE(joined.message().find("waiting for rank 1 to join"), std::string::npos) << joined.message();
  EXPECT_GE(s, 1.0);
  EXPECT_LT(s, 10.0);
}

// A receive whose sender never sends (it died) ends, its link aborted, once the heartbeats say
// the peer is dead (peer_fault from another thread), long before the bootstrap timeout; the
// waiting callback runs meanwhile (the network thread's heartbeats), and later transfers with
// that peer return at once.
TEST(NcclPeerLinks, AReceiveFromAPeerFoundDeadEndsWithoutWaitingOutTheTimeout) {
  SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL between ranks); this machine has " << gpu_count();
  NcclPeerLinks zero(0, 60), one(1, 60);
  const std::vector<std::string> memories = {zero.memory(), one.memory()};
  auto setup = zero.setup(memories);
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  Status joined_one = Status::Ok();
  std::thread joining([&] { joined_one = one.connect(1, memories, *setup); });
  const Status joined_zero = zero.connect(0, memories, *setup);
  joining.join();
  ASSERT_TRUE(joined_zero.ok() && joined_one.ok()) << joined_zero.message() << joined_one.message();
  CudaActivationOps ops0(0);
  Activations got = ops0.allocate(4, 64);
  Activations* rows[1] = {&got};
  int waited = 0;
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    zero.peer_fault(1, dist::PeerState::Lost, "rank 1 stopped answering");
  });
  const auto start = std::chrono::steady_clock::now();
  const bool landed = zero.receive(1, rows, [&] { ++waited; });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  killer.join();
  EXPECT_FALSE(landed);
  EXPECT_LT(s, 5.0);
  EXPECT_GT(waited, 10);
  EXPECT_FALSE(zero.receive(1, rows, {}));
}

TEST(NcclPeerLinks, TwoRanksOnTwoGpusExchangeRowsBothWaysInOrder) {
  SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL between ranks); this machine has " << gpu_count();
  NcclPeerLinks zero(0, 60), one(1, 60);
  const std::vector<std::string> memories = {zero.memory(), one.memory()};
  ASSERT_NE(memories[0], memories[1]);
  auto setup = zero.setup(memories);
  ASSERT_TRUE(setup.ok()) << setup.status().message();
  EXPECT_EQ(setup->size(), 2u * NCCL_UNIQUE_ID_BYTES);  // 0 -> 1 and 1 -> 0
  Status joined_one = Status::Ok();
  std::thread joining([&] { joined_one = one.connect(1, memories, *setup); });
  const Status joined_zero = zero.connect(0, memories, *setup);
  joining.join();
  ASSERT_TRUE(joined_zero.ok()) << joined_zero.message();
  ASSERT_TRUE(joined_one.ok()) << joined_one.message();
  ASSERT_TRUE(zero.linked(1) && one.linked(0));

  // Each rank sends 3 shipments of 2 batches (different shapes) while receiving the other's:
  // sends on one thread (the event loop's), receives on another (the network thread's).
  constexpr int kShipments = 3;
  // Both ranks are in this one process, where NCCL's P2P transport runs in its direct mode
  // (it reads and writes the peer's user buffers), and rows come from cudaMallocAsync, whose
  // pools peer access does not open (NcclLinks::create opens them for the same reason). Ranks
  // in processes of their own, as deployed, copy through NCCL's own buffers instead.
  for (int g = 0; g < 2; ++g) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, 1 - g, g) != cudaSuccess || !can) continue;
    cudaMemPool_t pool = nullptr;
    ASSERT_EQ(cudaDeviceGetDefaultMemPool(&pool, g), cudaSuccess);
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = 1 - g;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    ASSERT_EQ(cudaMemPoolSetAccess(pool, &access, 1), cudaSuccess);
  }
  CudaActivationOps ops0(0), ops1(1);
  CudaActivationOps* ops[2] = {&ops0, &ops1};
  NcclPeerLinks* links[2] = {&zero, &one};
  auto first = [](int rank, int s, int b) { return static_cast<float>(rank * 100000 + s * 1000 + b * 500); };
  auto rows = [](int s, int b) { return std::int64_t{1 + s + 3 * b}; };
  const std::int64_t width = 64;
  std::vector<Activations> sent[2], got[2];
  for (int rank = 0; rank < 2; ++rank)
    for (int s = 0; s < kShipments; ++s)
      for (int b = 0; b < 2; ++b) {
        const std::vector<float> v = values(rows(s, b) * width, first(rank, s, b));
        sent[rank].push_back(ops[rank]->allocate_from_host(v.data(), rows(s, b), width));
        // The receiver allocates before it receives, as decode_payload does.
        got[1 - rank].push_back(ops[1 - rank]->allocate(rows(s, b), width));
      }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      for (int s = 0; s < kShipments; ++s) {
        const Activations* batch[2] = {&sent[rank][2 * s], &sent[rank][2 * s + 1]};
        links[rank]->send(1 - rank, batch);
      }
    });
    threads.emplace_back([&, rank] {
      for (int s = 0; s < kShipments; ++s) {
        Activations* batch[2] = {&got[rank][2 * s], &got[rank][2 * s + 1]};
        links[rank]->receive(1 - rank, batch, {});
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank)
    for (int s = 0; s < kShipments; ++s)
      for (int b = 0; b < 2; ++b) {
        ASSERT_EQ(cudaSetDevice(rank), cudaSuccess);
        EXPECT_EQ(read(got[rank][static_cast<std::size_t>(2 * s + b)]),
                  values(rows(s, b) * width, first(1 - rank, s, b)))
            << "rank " << rank << " shipment " << s << " batch " << b;
      }
}

}  // namespace
}  // namespace sy
