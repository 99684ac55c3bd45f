// The cuda backend on several GPUs in one process: rows between GPUs over NCCL land bit for bit,
// and a layout with devices on GPU 0 and GPU 1 (attention and experts on both, so rows cross
// in both directions every block) serves the cpu reference's greedy tokens. These skip with
// fewer than 2 GPUs, saying so; a GPU the machine lacks is an error naming it (one GPU will do).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <filesystem>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/cuda_activation_ops.h"
#include "engine/cuda/cuda_deployment.h"
#include "engine/cuda/nccl_links.h"
#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"
#include "tests/cuda/gpu_skips.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

#define SKIP_WITHOUT_TWO_GPUS()                                                                     \
  SKIP_WITHOUT_GPU();                                                                               \
  if (gpu_count() < 2) {                                                                            \
    GTEST_SKIP() << "needs 2 GPUs (NCCL between GPUs of one process); this machine has " << gpu_count(); \
  }

std::vector<float> read(const Activations& a) {
  std::vector<float> v(static_cast<std::size_t>(a.rows() * a.width()));
  EXPECT_EQ(cudaMemcpy(v.data(), CudaActivationOps::data(a), v.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

Activations filled(CudaActivationOps& ops, std::int64_t rows, std::int64_t width, float first) {
  Activations a = ops.allocate(rows, width);
  std::vector<float> v(static_cast<std::size_t>(rows * width));
  std::iota(v.begin(), v.end(), first);
  EXPECT_EQ(cudaMemcpy(CudaActivationOps::data(a), v.data(), v.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  // From pageable memory cudaMemcpy may return before the DMA has landed, and NCCL's streams
  // are not ordered after the legacy stream: wait on every GPU (the copy ran on the current one).
  for (int g = 0; g < gpu_count(); ++g)
    EXPECT_TRUE(cudaSetDevice(g) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess) << "gpu " << g;
  return a;
}

TEST(MultiGpu, NcclMovesRowsBothWaysInOneGroup) {
  SKIP_WITHOUT_TWO_GPUS();
  auto links = NcclLinks::create({0, 1});
  ASSERT_TRUE(links.ok()) << links.status().message();
  CudaActivationOps on0(0), on1(1);
  const Activations a = filled(on0, 5, 301, 0.5f), b = filled(on1, 3, 301, -7.25f), c = filled(on0, 1, 301, 1e6f);
  Activations a1 = on1.allocate(5, 301), b0 = on0.allocate(3, 301), c1 = on1.allocate(1, 301);
  const std::vector<NcclLinks::Move> moves = {
      {CudaActivationOps::data(a), 0, CudaActivationOps::data(a1), 1, 5 * 301},
      {CudaActivationOps::data(b), 1, CudaActivationOps::data(b0), 0, 3 * 301},
      {CudaActivationOps::data(c), 0, CudaActivationOps::data(c1), 1, 301},  // a second move 0 -> 1, in order
      {CudaActivationOps::data(c), 0, CudaActivationOps::data(c1), 1, 0}};   // nothing to move
  (*links)->move(moves);
  EXPECT_EQ(read(a1), read(a));
  EXPECT_EQ(read(b0), read(b));
  EXPECT_EQ(read(c1), read(c));
}

class MultiGpuModel : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    dir_ = fs::temp_directory_path() / ("sy_test_multi_gpu_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    // f32: both backends compute in float32, so greedy tokens must be the reference's exactly.
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 23, dir_).ok());
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = *w;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  DeploymentOptions options(PolicyKind kind) const {
    DeploymentOptions o;
    o.clock = Clock::Wall;
    o.policy.kind = kind;
    o.kv_pages_per_rank = 256;
    o.page_size = 16;
    return o;
  }
  fs::path dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(MultiGpuModel, AGpuTheMachineLacksIsNamed) {
  CudaDeploymentOptions cuda;
  cuda.device_gpu = {0, 0, 0, gpu_count()};
  auto d = CudaDeployment::create(weights_, Topology::disaggregated(weights_->config(), 2, 2),
                                  options(PolicyKind::Async), cuda);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("device dev3 is on gpu " + std::to_string(gpu_count()) + ", which does not exist"),
            std::string::npos)
      << d.status().message();
}

TEST_F(MultiGpuModel, TwoGpusServeTheReferenceTokens) {
  SKIP_WITHOUT_TWO_GPUS();
  const ModelConfig& c = weights_->config();
  std::mt19937_64 rng(11);
  std::vector<RequestSpec> requests;
  std::vector<std::vector<std::int32_t>> expected;
  for (std::int32_t i = 0; i < 16; ++i) {
    RequestSpec r;
    r.id = i;
    r.external_id = std::to_string(i);
    r.prompt.resize(1 + rng() % 30);
    for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(c.vocab_size));
    r.max_new_tokens = 1 + static_cast<std::int32_t>(rng() % 10);
    ReferenceSession session(weights_, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
    GenerateOptions g;
    g.max_new_tokens = r.max_new_tokens;
    auto out = generate(session, r.prompt, g);
    ASSERT_TRUE(out.ok());
    expected.push_back(*out);
    requests.push_back(std::move(r));
  }
  // dev0, dev1 attention; dev2, dev3 experts: each GPU has one of each, so every block's rows
  // go to the other GPU and back.
  CudaDeploymentOptions cuda;
  cuda.device_gpu = {0, 1, 1, 0};
  for (const PolicyKind kind : {PolicyKind::Async, PolicyKind::Sync}) {
    auto made = CudaDeployment::create(weights_, Topology::disaggregated(c, 2, 2), options(kind), cuda);
    ASSERT_TRUE(made.ok()) << made.status().message();
    CudaDeployment& d = **made;
    d.submit(requests);
    d.run();
    ASSERT_EQ(d.coordinator().requests().size(), requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const RequestRecord& r = d.coordinator().requests()[i];
      ASSERT_EQ(r.state, RequestState::Finished) << "request " << i;
      EXPECT_EQ(r.output, expected[i]) << "request " << i;
    }
    EXPECT_TRUE(d.cluster().quiescent());
  }
}

}  // namespace
}  // namespace sy
