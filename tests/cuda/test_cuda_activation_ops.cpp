// CudaActivationOps against the host semantics of HostActivationOps: gather, append and
// scatter move exactly the rows they name; rows to and from host memory (a transport between
// processes) arrive bit for bit, through the shipment codec too. Skips without a GPU, saying why.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "engine/cpu/host_activation_ops.h"
#include "engine/cuda/cuda_activation_ops.h"
#include "engine/dist/shipment_codec.h"
#include "kernels/cuda/cuda_kernels.h"

namespace sy {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!kernels::cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << kernels::cuda_device_problem()

// A handle filled with `values` (rows × width).
Activations filled(CudaActivationOps& ops, std::int64_t rows, std::int64_t width, float first) {
  Activations a = ops.allocate(rows, width);
  std::vector<float> v(static_cast<std::size_t>(rows * width));
  std::iota(v.begin(), v.end(), first);
  EXPECT_EQ(cudaMemcpy(CudaActivationOps::data(a), v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // From pageable memory cudaMemcpy may return before the DMA has landed, and the ops' streams
  // are non-blocking (not ordered after the legacy stream): wait, or they may read old bytes.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return a;
}

std::vector<float> read(const Activations& a) {
  std::vector<float> v(static_cast<std::size_t>(a.rows() * a.width()));
  EXPECT_EQ(cudaMemcpy(v.data(), CudaActivationOps::data(a), v.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

std::vector<float> row(const std::vector<float>& v, std::int64_t r, std::int64_t width) {
  return {v.begin() + r * width, v.begin() + (r + 1) * width};
}

TEST(CudaActivationOps, GatherAppendScatterMoveTheNamedRows) {
  SKIP_WITHOUT_GPU();
  const std::int64_t W = 300;
  CudaActivationOps a(0), b(0);  // two workers on one GPU pass handles as they are
  Activations x = filled(a, 4, W, 0.0f), y = filled(b, 3, W, 10000.0f);
  const std::vector<float> hx = read(x), hy = read(y);

  Activations g;
  const std::vector<SourceRow> from = {{&y, 2}, {&x, 0}, {&x, 1}, {&y, 0}};
  b.gather(from, g);
  ASSERT_EQ(g.rows(), 4);
  const std::vector<float> hg = read(g);
  EXPECT_EQ(row(hg, 0, W), row(hy, 2, W));
  EXPECT_EQ(row(hg, 1, W), row(hx, 0, W));
  EXPECT_EQ(row(hg, 2, W), row(hx, 1, W));
  EXPECT_EQ(row(hg, 3, W), row(hy, 0, W));

  Activations tail = filled(a, 2, W, 50000.0f);
  const std::vector<float> ht = read(tail);
  b.append(g, std::move(tail));
  ASSERT_EQ(g.rows(), 6);
  const std::vector<float> hga = read(g);
  EXPECT_EQ(row(hga, 3, W), row(hy, 0, W));
  EXPECT_EQ(row(hga, 5, W), row(ht, 1, W));

  Activations dst = a.allocate(8, W);
  std::vector<TargetRow> to;
  for (std::int64_t i = 0; i < 6; ++i) to.push_back({&dst, 7 - i});
  b.scatter(g, to);
  const std::vector<float> hd = read(dst);
  for (std::int64_t i = 0; i < 6; ++i) EXPECT_EQ(row(hd, 7 - i, W), row(hga, i, W)) << "row " << i;
}

TEST(CudaActivationOps, ReleasedStorageIsReused) {
  SKIP_WITHOUT_GPU();
  CudaActivationOps ops(0);
  const float* first = nullptr;
  {
    Activations a = ops.allocate(10, 100);
    first = CudaActivationOps::data(a);
  }
  Activations b = ops.allocate(5, 200);  // same size class
  EXPECT_EQ(CudaActivationOps::data(b), first);
}

TEST(CudaActivationOps, RowsToHostAndBackArriveBitForBit) {
  SKIP_WITHOUT_GPU();
  CudaActivationOps sender(0), receiver(0);
  // Odd sizes, and a staging buffer that has to grow between calls.
  for (const auto& [rows, width] : {std::pair<std::int64_t, std::int64_t>{3, 7}, {1, 1}, {513, 1031}}) {
    const Activations x = filled(sender, rows, width, -0.375f * static_cast<float>(width));
    const std::vector<float> hx = read(x);
    // One byte off alignment, as a row block lands inside a message.
    std::vector<char> bytes(static_cast<std::size_t>(rows * width) * 4 + 1);
    sender.copy_to_host(x, bytes.data() + 1);
    EXPECT_EQ(std::memcmp(bytes.data() + 1, hx.data(), hx.size() * 4), 0) << rows << " x " << width;
    const Activations y = receiver.allocate_from_host(bytes.data() + 1, rows, width);
    ASSERT_EQ(y.rows(), rows);
    ASSERT_EQ(y.width(), width);
    EXPECT_EQ(&y.owner(), &receiver);
    EXPECT_EQ(read(y), hx) << rows << " x " << width;
  }
}

TEST(CudaActivationOps, ShipmentCodecCarriesGpuRowsBetweenBackends) {
  SKIP_WITHOUT_GPU();
  CudaActivationOps gpu(0), arrivals(0);
  HostActivationOps host;
  Shipment sent{1, 2, LayerKind::Expert, 3, 0, {}};
  std::vector<std::vector<float>> rows;
  for (int b = 0; b < 2; ++b) {
    TokenBatch batch;
    batch.layer = LayerId::expert(3, b);
    batch.columns = kExpertColumns;
    // Expert rows as the dispatch makes them (wire-format.md): a rank, a slot and a weight each.
    for (int r = 0; r < 2 + 3 * b; ++r) {
      batch.row.push_back({.request = r, .rank = 0, .slot = static_cast<std::int32_t>(r), .weight = 0.5f});
    }
    batch.hidden = filled(gpu, batch.rows(), 33, 1000.0f * static_cast<float>(b));
    rows.push_back(read(batch.hidden));
    sent.batches.push_back(std::move(batch));
  }
  dist::ByteWriter w;
  dist::encode_payload(w, sent);
  // GPU to GPU (another process's arrival pool) and GPU to host (a cpu rank would read the same bytes).
  for (const bool to_gpu : {true, false}) {
    dist::ByteReader r(w.bytes().data(), w.bytes().size());
    Shipment got;
    const dist::ArrivalOps ops = [&](std::int32_t dst) -> ActivationOps* {
      return dst != 2 ? nullptr : to_gpu ? static_cast<ActivationOps*>(&arrivals) : &host;
    };
    ASSERT_TRUE(dist::decode_payload(r, ops, 0, got).ok());
    ASSERT_EQ(got.batches.size(), 2u);
    for (std::size_t b = 0; b < 2; ++b) {
      const Activations& h = got.batches[b].hidden;
      ASSERT_EQ(h.rows(), sent.batches[b].hidden.rows());
      if (to_gpu) {
        EXPECT_EQ(&h.owner(), &arrivals);
        EXPECT_EQ(read(h), rows[b]) << "batch " << b;
      } else {
        const float* d = HostActivationOps::data(h);
        EXPECT_EQ(std::vector<float>(d, d + h.rows() * h.width()), rows[b]) << "batch " << b;
      }
    }
  }
}

}  // namespace
}  // namespace sy
