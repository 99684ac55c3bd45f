// The cpu backend on the wall clock: every device runs on a thread of its own, so executions
// of different devices overlap in wall time, and the outputs still match the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <random>
#include <vector>

#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"
#include "engine/cpu/cpu_deployment.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

struct Interval {
  std::int32_t device;
  std::int64_t start, end;
};

// Every execution and merge, as the runtime reports them.
class Spans final : public RuntimeObserver {
 public:
  void on_execution(std::int32_t device, LayerKind, std::int32_t, std::int32_t, std::int32_t, std::int64_t,
                    std::int64_t start_ns, std::int64_t end_ns) override {
    all.push_back({device, start_ns, end_ns});
  }
  void on_merge(std::int32_t device, std::int32_t, std::int64_t, std::int64_t start_ns, std::int64_t end_ns) override {
    all.push_back({device, start_ns, end_ns});
    ++merges;
  }
  std::vector<Interval> all;
  std::int64_t merges = 0;
};

class ConcurrentDevices : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sy_test_concurrent_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Qwen2Moe, ModelPreset::Tiny, kernels::DType::F32), 3, dir_).ok());
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = *w;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(ConcurrentDevices, ExecutionsOverlapInWallTimeAndOutputsMatchTheReference) {
  const ModelConfig& c = weights_->config();
  std::mt19937_64 rng(4);
  std::vector<RequestSpec> requests;
  std::vector<std::vector<std::int32_t>> expected;
  for (std::int32_t i = 0; i < 48; ++i) {
    RequestSpec r;
    r.id = i;
    r.external_id = std::to_string(i);
    r.prompt.resize(8 + rng() % 24);
    for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(c.vocab_size));
    r.max_new_tokens = 16;
    ReferenceSession session(weights_, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
    GenerateOptions g;
    g.max_new_tokens = r.max_new_tokens;
    auto out = generate(session, r.prompt, g);
    ASSERT_TRUE(out.ok());
    expected.push_back(*out);
    requests.push_back(std::move(r));
  }

  DeploymentOptions o;
  o.clock = Clock::Wall;
  o.policy.kind = PolicyKind::Async;
  o.kv_pages_per_rank = 1024;
  o.page_size = 8;
  CpuDeployment d(weights_, Topology::disaggregated(c, 2, 4), o);
  Spans spans;
  d.observers().add(&spans, nullptr);
  d.submit(requests);
  d.run();
  d.observers().remove(&spans, nullptr);

  for (std::size_t i = 0; i < requests.size(); ++i) {
    const RequestRecord& r = d.coordinator().requests()[i];
    ASSERT_EQ(r.state, RequestState::Finished) << "request " << i;
    EXPECT_EQ(r.output, expected[i]) << "request " << i;
  }
  EXPECT_GT(spans.merges, 0) << "the token pool's merges run as executions of their own";

  // Each device's own executions never overlap (one stream per device) ...
  std::sort(spans.all.begin(), spans.all.end(), [](const Interval& a, const Interval& b) {
    return a.device != b.device ? a.device < b.device : a.start < b.start;
  });
  for (std::size_t i = 1; i < spans.all.size(); ++i) {
    if (spans.all[i].device == spans.all[i - 1].device) {
      EXPECT_GE(spans.all[i].start, spans.all[i - 1].end);
    }
  }
  // ... while executions of different devices do: the attention ranks and the expert devices
  // compute at the same time.
  std::int64_t overlapping_pairs = 0;
  std::sort(spans.all.begin(), spans.all.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  for (std::size_t i = 0; i < spans.all.size(); ++i) {
    for (std::size_t j = i + 1; j < spans.all.size() && spans.all[j].start < spans.all[i].end; ++j) {
      if (spans.all[j].device != spans.all[i].device) ++overlapping_pairs;
    }
  }
  EXPECT_GT(overlapping_pairs, 0) << spans.all.size() << " executions, none overlapping another device's";
}

// A service that ends on a signal leaves its loop while devices still compute; the deployment
// then goes with executions running on its streams. Those read their workers' batches and the
// KV caches, so the executors must be joined before those go (serve segfaulted in
// CpuExecutor::run_experts 2 times in 10 on SIGTERM; under ASan every round here reported the
// use after free).
TEST_F(ConcurrentDevices, ADeploymentLeftWhileItsDevicesComputeGoesCleanly) {
  const ModelConfig& c = weights_->config();
  struct StopAfter final : RuntimeObserver {
    void on_execution(std::int32_t, LayerKind, std::int32_t, std::int32_t, std::int32_t, std::int64_t, std::int64_t,
                      std::int64_t) override {
      ++seen;
    }
    std::int64_t seen = 0;
  };
  for (std::int64_t after : {5, 40, 200}) {
    DeploymentOptions o;
    o.clock = Clock::Wall;
    o.policy.kind = PolicyKind::Async;
    o.kv_pages_per_rank = 1024;
    o.page_size = 8;
    auto d = std::make_unique<CpuDeployment>(weights_, Topology::disaggregated(c, 2, 4), o);
    StopAfter stop;
    d->observers().add(&stop, nullptr);
    std::vector<RequestSpec> requests;
    for (std::int32_t i = 0; i < 32; ++i) {
      RequestSpec r;
      r.id = i;
      r.external_id = std::to_string(i);
      r.prompt.assign(24, 7 + i);
      r.max_new_tokens = 64;
      requests.push_back(std::move(r));
    }
    d->submit(requests);
    // Left after `after` executions: with 32 requests on six devices, others are under way.
    d->loop().run([&] { return stop.seen >= after; });
    EXPECT_GE(stop.seen, after);
    EXPECT_FALSE(d->cluster().quiescent()) << "nothing was running when the loop was left";
    d.reset();
  }
}

}  // namespace
}  // namespace sy
