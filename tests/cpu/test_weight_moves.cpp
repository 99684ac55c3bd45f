// Placement that moves weights on the cpu backend: under load, a move and a replica copy the
// expert's weights into memory the target device owns while serving goes on, switch at a safe
// point, free the source's copy, and every request's greedy tokens stay the reference's.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <vector>

#include "engine/cpu/cpu_deployment.h"
#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

struct Fetches final : RuntimeObserver {
  struct Fetch {
    std::int32_t device, source, block, expert;
    std::int64_t bytes, start, end;
  };
  void on_weight_fetch(std::int32_t device, std::int32_t source, std::int32_t block, std::int32_t expert,
                       std::int64_t bytes, std::int64_t start_ns, std::int64_t end_ns) override {
    all.push_back({device, source, block, expert, bytes, start_ns, end_ns});
  }
  std::vector<Fetch> all;
};

// After `after` tokens: asks for the move, then (staged behind it) the replica.
class ChangeAfter final : public RequestObserver {
 public:
  ChangeAfter(Coordinator& co, std::vector<Placement> changes, std::int64_t after)
      : co_(co), changes_(std::move(changes)), after_(after) {}
  void on_request(const RequestUpdate& u) override {
    if (u.phase != RequestPhase::Token || fired_ || ++tokens_ < after_) return;
    fired_ = true;
    for (Placement& p : changes_) {
      std::vector<WeightCopy> copies;
      statuses.push_back(co_.request_placement(p, [this](std::int64_t) { ++applied; }, &copies));
      started.insert(started.end(), copies.begin(), copies.end());
      staged_at_request.push_back(co_.staging());
    }
  }
  std::vector<Status> statuses;
  std::vector<WeightCopy> started;
  std::vector<bool> staged_at_request;
  int applied = 0;

 private:
  Coordinator& co_;
  std::vector<Placement> changes_;
  std::int64_t after_;
  std::int64_t tokens_ = 0;
  bool fired_ = false;
};

class WeightMoves : public ::testing::TestWithParam<Clock> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sy_test_weight_moves_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 5, dir_).ok());
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = *w;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::shared_ptr<const ModelWeights> weights_;
};

TEST_P(WeightMoves, MovesAndReplicasUnderLoadLoseNoTokenAndMatchTheReference) {
  const ModelConfig& c = weights_->config();
  std::mt19937_64 rng(11);
  std::vector<RequestSpec> requests;
  std::vector<std::vector<std::int32_t>> expected;
  for (std::int32_t i = 0; i < 24; ++i) {
    RequestSpec r;
    r.id = i;
    r.external_id = std::to_string(i);
    r.prompt.resize(6 + rng() % 12);
    for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(c.vocab_size));
    r.max_new_tokens = 12;
    ReferenceSession session(weights_, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
    GenerateOptions g;
    g.max_new_tokens = r.max_new_tokens;
    auto out = generate(session, r.prompt, g);
    ASSERT_TRUE(out.ok());
    expected.push_back(*out);
    requests.push_back(std::move(r));
  }

  DeploymentOptions o;
  o.clock = GetParam();
  o.policy.kind = PolicyKind::Async;
  o.kv_pages_per_rank = 512;
  o.page_size = 8;
  // Devices 0-1 attention; 2-5 hold the experts round-robin (expert e on device 2 + e % 4).
  CpuDeployment d(weights_, Topology::disaggregated(c, 2, 4), o);
  const Placement start = d.cluster().topology().placement;
  ASSERT_EQ(start.devices(1, 1), std::vector<std::int32_t>{3});
  Placement moved = start;
  ASSERT_TRUE(moved.set(1, 1, {5}).ok());  // expert 1 of block 1: device 3 -> 5
  Placement replicated = moved;
  for (std::int32_t b = 0; b < c.num_layers; ++b) ASSERT_TRUE(replicated.add(b, 0, 4).ok());  // expert 0 also on 4

  Fetches fetches;
  ChangeAfter change(d.coordinator(), {moved, replicated}, 40);
  d.observers().add(&fetches, &change);
  d.submit(requests);
  d.run();
  d.observers().remove(&fetches, &change);

  for (std::size_t i = 0; i < requests.size(); ++i) {
    const RequestRecord& r = d.coordinator().requests()[i];
    ASSERT_EQ(r.state, RequestState::Finished) << "request " << i;
    EXPECT_EQ(r.output, expected[i]) << "request " << i;
  }
  // Both changes were accepted while copies ran, and switched in (together) afterwards.
  ASSERT_EQ(change.statuses.size(), 2u);
  for (const Status& s : change.statuses) EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(change.staged_at_request, (std::vector<bool>{true, true}));
  EXPECT_EQ(change.applied, 2);
  EXPECT_EQ(d.cluster().topology().placement, replicated);
  // One copy per new (block, expert, device), each from the device that held it, each seen
  // by the observers with the expert's bytes.
  ASSERT_EQ(change.started.size(), 1u + static_cast<std::size_t>(c.num_layers));
  EXPECT_EQ(change.started[0].source, 3);
  EXPECT_EQ(change.started[0].target, 5);
  const std::int64_t expert_bytes = 3 * static_cast<std::int64_t>(c.hidden_size) * c.moe_intermediate_size * 4;
  ASSERT_EQ(fetches.all.size(), change.started.size());
  for (const auto& f : fetches.all) {
    EXPECT_EQ(f.bytes, expert_bytes);
    EXPECT_GE(f.end, f.start);
    EXPECT_TRUE(f.device == 5 || f.device == 4) << f.device;
  }
  // The source's copy is freed at the switch; the targets hold theirs.
  const ExpertResidency& r = d.cluster().residency();
  EXPECT_FALSE(r.resident(1, 1, 3));
  EXPECT_TRUE(r.resident(1, 1, 5));
  for (std::int32_t b = 0; b < c.num_layers; ++b) EXPECT_TRUE(r.resident(b, 0, 4) && r.resident(b, 0, 2)) << b;
  EXPECT_EQ(r.resident_experts(3), 2 * c.num_layers - 1);
  EXPECT_EQ(r.used_bytes(5), (2 * c.num_layers + 1) * expert_bytes);
  EXPECT_FALSE(d.cluster().copying());
}

INSTANTIATE_TEST_SUITE_P(Clocks, WeightMoves, ::testing::Values(Clock::Virtual, Clock::Wall),
                         [](const auto& p) { return std::string(clock_name(p.param)); });

}  // namespace
}  // namespace sy
