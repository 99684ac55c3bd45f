// CudaActivationOps against the host semantics of HostActivationOps: gather, append and
// scatter move exactly the rows they name. Skips without a GPU, saying why.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <numeric>
#include <vector>

#include "engine/cuda/cuda_activation_ops.h"
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

}  // namespace
}  // namespace sy
