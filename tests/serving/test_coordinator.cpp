// Admission: continuous batching under capacity limits queues or rejects, never crashes, and
// bad policy commands are refused while serving goes on.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "engine/model/random_model.h"
#include "engine/cpu/cpu_deployment.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

class CoordinatorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_coordinator_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 2, dir_).ok());
    weights_ = *ModelWeights::load(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static RequestSpec request(std::int64_t id, std::int32_t prompt, std::int32_t new_tokens, std::int64_t at = 0) {
    RequestSpec r;
    r.id = id;
    r.external_id = std::to_string(id);
    r.arrival_ns = at;
    r.prompt.assign(static_cast<std::size_t>(prompt), static_cast<std::int32_t>(id % 50));
    r.max_new_tokens = new_tokens;
    return r;
  }
  static DeploymentOptions options(std::int32_t pages, std::int32_t max_batch) {
    DeploymentOptions o;
    o.cost_model = std::make_shared<LinearCostModel>(10'000, 1'000);
    o.kv_pages_per_rank = pages;
    o.page_size = 4;
    o.coordinator.max_batch_per_rank = max_batch;
    return o;
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
};

TEST_F(CoordinatorTest, MaxBatchQueuesTheRestAndServesEveryone) {
  const Topology topo = Topology::disaggregated(weights_->config(), 2, 2);
  CpuDeployment d(weights_, topo, options(1024, 3));
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 20; ++i) reqs.push_back(request(i, 6, 5));
  d.submit(reqs);
  std::int32_t most = 0;
  std::function<void()> probe = [&] {
    for (std::int32_t r = 0; r < 2; ++r) most = std::max(most, d.coordinator().running(r));
    if (!d.coordinator().done()) d.loop().post(d.loop().now() + 5'000, probe);
  };
  d.loop().post(0, probe);
  d.run();
  EXPECT_EQ(most, 3);
  for (const auto& r : d.coordinator().requests()) {
    EXPECT_EQ(r.state, RequestState::Finished);
    EXPECT_EQ(r.output.size(), 5u);
  }
}

TEST_F(CoordinatorTest, KvPagesLimitQueuesAndOversizedRequestsAreRejected) {
  const Topology topo = Topology::colocated(weights_->config(), 2);
  // 6 pages of 4 positions per rank: a 10 + 6 position request takes 4 pages, so one per rank
  // at a time; a 40-position request can never fit and is rejected with a reason.
  CpuDeployment d(weights_, topo, options(6, 64));
  d.submit({request(0, 10, 6), request(1, 10, 6), request(2, 10, 6), request(3, 30, 10), request(4, 10, 6)});
  d.run();
  const auto& reqs = d.coordinator().requests();
  for (int i : {0, 1, 2, 4}) EXPECT_EQ(reqs[i].state, RequestState::Finished) << i;
  EXPECT_EQ(reqs[3].state, RequestState::Rejected);
  EXPECT_NE(reqs[3].reject_reason.find("40 KV positions"), std::string::npos) << reqs[3].reject_reason;
  EXPECT_EQ(d.cluster().kv(0).free_pages(), 6);  // everything released
  EXPECT_EQ(d.cluster().kv(1).free_pages(), 6);
}

TEST_F(CoordinatorTest, NewRequestsGoToTheRankWithMostFreePages) {
  const Topology topo = Topology::disaggregated(weights_->config(), 3, 1);
  CpuDeployment d(weights_, topo, options(64, 64));
  d.submit({request(0, 20, 30, 0), request(1, 4, 30, 1), request(2, 8, 30, 2), request(3, 4, 30, 3)});
  d.run();
  const auto& reqs = d.coordinator().requests();
  EXPECT_EQ(reqs[0].rank, 0);
  EXPECT_EQ(reqs[1].rank, 1);
  EXPECT_EQ(reqs[2].rank, 2);
  EXPECT_EQ(reqs[3].rank, 1);  // rank 1 holds the fewest pages (34 positions vs 38 and 50)
}

TEST_F(CoordinatorTest, RequestsArrivingAtAnIdleClusterRotateOverTheRanks) {
  const Topology topo = Topology::disaggregated(weights_->config(), 2, 1);
  CpuDeployment d(weights_, topo, options(64, 64));
  // Arrivals 1 s apart: each finds every rank empty, so free pages tie.
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request(i, 5, 2, std::int64_t{i} * 1'000'000'000));
  d.submit(reqs);
  d.run();
  const auto& done = d.coordinator().requests();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(done[i].rank, i % 2) << i;
}

TEST_F(CoordinatorTest, BadPolicyRequestsAreRefusedAndServingContinues) {
  CpuDeployment d(weights_, Topology::colocated(weights_->config(), 2), options(256, 64));
  RuntimePolicy bad;
  bad.kind = PolicyKind::PingPong;
  bad.microbatches = 0;
  auto s = d.coordinator().request_policy(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("micro-batch"), std::string::npos);
  RuntimePolicy unknown;
  unknown.scheduler.name = "random";
  EXPECT_NE(d.coordinator().request_policy(unknown).message().find("random"), std::string::npos);
  d.submit({request(0, 5, 4), request(1, 7, 4)});
  d.run();
  for (const auto& r : d.coordinator().requests()) EXPECT_EQ(r.state, RequestState::Finished);
  EXPECT_EQ(d.coordinator().policy_switches(), 0);
}

TEST_F(CoordinatorTest, PausedAdmissionHoldsNewRequests) {
  CpuDeployment d(weights_, Topology::colocated(weights_->config(), 2), options(256, 64));
  d.coordinator().set_admission_paused(true);
  d.submit({request(0, 5, 4), request(1, 7, 4)});
  d.loop().run_until(10'000'000);
  EXPECT_EQ(d.coordinator().waiting(), 2u);
  d.coordinator().set_admission_paused(false);
  d.run();
  for (const auto& r : d.coordinator().requests()) EXPECT_EQ(r.state, RequestState::Finished);
}

// Back-pressure: a flood far beyond what the cluster serves is turned away at the door with a
// reason, the waiting queue never exceeds its bounds, and what was admitted is served.
TEST_F(CoordinatorTest, AFullAdmissionQueueRejectsWithAReasonAndStaysBounded) {
  DeploymentOptions o = options(1024, 2);
  o.coordinator.max_waiting_requests = 5;
  o.coordinator.max_waiting_tokens = 1000;
  o.coordinator.keep_finished = true;
  CpuDeployment d(weights_, Topology::disaggregated(weights_->config(), 1, 2), o);
  std::vector<RequestSpec> reqs;
  for (std::int64_t i = 0; i < 200; ++i) reqs.push_back(request(i, 8, 4, /*at=*/i * 100));  // 10 M req/s
  d.submit(reqs);
  std::size_t most_waiting = 0;
  std::function<void()> probe = [&] {
    most_waiting = std::max(most_waiting, d.coordinator().waiting());
    EXPECT_LE(d.coordinator().waiting_tokens(), 1000);
    if (!d.coordinator().done()) d.loop().post(d.loop().now() + 1'000, probe);
  };
  d.loop().post(0, probe);
  d.run();
  EXPECT_LE(most_waiting, 5u);
  std::int64_t finished = 0, rejected = 0;
  for (const RequestRecord& r : d.coordinator().requests()) {
    if (r.state == RequestState::Finished) {
      ++finished;
      EXPECT_EQ(r.output.size(), 4u);
    } else {
      ASSERT_EQ(r.state, RequestState::Rejected);
      ++rejected;
      EXPECT_NE(r.reject_reason.find("admission queue is full"), std::string::npos) << r.reject_reason;
      EXPECT_NE(r.reject_reason.find("limits 5 requests, 1000 tokens"), std::string::npos) << r.reject_reason;
    }
  }
  EXPECT_GT(rejected, 100);
  EXPECT_GE(finished, 7);  // 2 running + 5 waiting at least
  EXPECT_EQ(finished + rejected, 200);
  EXPECT_EQ(d.coordinator().rejected_queue_full(), rejected);
}

// A long-running service (keep_finished off, as the demo) keeps no record of a request the
// full queue turned away: a flood leaves memory where it was. Observers still see every one.
TEST_F(CoordinatorTest, AServiceKeepsNoRecordOfRejectedRequests) {
  DeploymentOptions o = options(1024, 2);
  o.coordinator.max_waiting_requests = 5;
  o.coordinator.keep_finished = false;
  CpuDeployment d(weights_, Topology::disaggregated(weights_->config(), 1, 2), o);
  struct Counter : RequestObserver {
    std::int64_t rejected = 0, finished = 0, queue_full = 0;
    void on_request(const RequestUpdate& u) override {
      if (u.phase == RequestPhase::Rejected) ++rejected;
      if (u.phase == RequestPhase::Finished) ++finished;
      if (u.reject_reason == RejectReason::QueueFull) ++queue_full;
    }
  } counter;
  d.observers().add(nullptr, &counter);
  std::vector<RequestSpec> reqs;
  for (std::int64_t i = 0; i < 2000; ++i) reqs.push_back(request(i, 8, 4, /*at=*/i * 100));
  d.submit(reqs);
  std::size_t most_records = 0;
  std::function<void()> probe = [&] {
    most_records = std::max(most_records, d.coordinator().requests().size());
    if (!d.coordinator().done()) d.loop().post(d.loop().now() + 1'000, probe);
  };
  d.loop().post(0, probe);
  d.run();
  d.observers().remove(nullptr, &counter);
  EXPECT_TRUE(d.coordinator().done());
  EXPECT_EQ(counter.finished + counter.rejected, 2000);
  EXPECT_EQ(counter.queue_full, counter.rejected);
  EXPECT_EQ(d.coordinator().rejected_queue_full(), counter.rejected);
  EXPECT_GT(counter.rejected, 1900);
  // Running and waiting requests only: never the flood.
  EXPECT_LE(most_records, 16u) << "records of rejected requests were kept";
}

// A sampler execution's size is the tokens it sampled: a prefill's prompt rows pass through
// the sampler without logits, and counted they made `trace compare` report a prompt-heavy run's
// prompts as output tokens.
TEST_F(CoordinatorTest, SamplerExecutionsCountTheTokensTheySampledNotThePromptRows) {
  CpuDeployment d(weights_, Topology::disaggregated(weights_->config(), 2, 2), options(1024, 4));
  struct Counter : RuntimeObserver, RequestObserver {
    std::int64_t sampler_tokens = 0, sampler_executions = 0, attention_rows = 0, produced = 0;
    void on_execution(std::int32_t, LayerKind kind, std::int32_t block, std::int32_t, std::int32_t,
                      std::int64_t tokens, std::int64_t, std::int64_t) override {
      if (kind == LayerKind::Sampler) {
        sampler_tokens += tokens;
        ++sampler_executions;
      }
      if (kind == LayerKind::Attention && block == 0) attention_rows += tokens;
    }
    void on_request(const RequestUpdate& u) override {
      if (u.phase == RequestPhase::Token) ++produced;
    }
  } counter;
  d.observers().add(&counter, &counter);
  // Prompts of 5 to 23 tokens, 6 new tokens each.
  std::vector<RequestSpec> reqs;
  for (std::int64_t i = 0; i < 6; ++i) reqs.push_back(request(i, 5 + 3 * static_cast<std::int32_t>(i) + static_cast<std::int32_t>(i), 6, i * 50'000));
  d.submit(reqs);
  d.run();
  d.observers().remove(&counter, &counter);
  ASSERT_TRUE(d.coordinator().done());
  EXPECT_EQ(counter.produced, 6 * 6);
  EXPECT_EQ(counter.sampler_tokens, counter.produced);
  EXPECT_GT(counter.sampler_executions, 0);
  // Every prompt row and every generated token but the last went through block 0's attention:
  // the rows the sampler took with them, which it no longer counts.
  std::int64_t prompt_rows = 0;
  for (const RequestSpec& r : reqs) prompt_rows += static_cast<std::int64_t>(r.prompt.size());
  EXPECT_EQ(counter.attention_rows, prompt_rows + 6 * 5);
}

TEST_F(CoordinatorTest, TheTokenBoundRejectsLongPromptsFirst) {
  DeploymentOptions o = options(1024, 1);
  o.coordinator.max_waiting_tokens = 20;
  CpuDeployment d(weights_, Topology::disaggregated(weights_->config(), 1, 2), o);
  // One runs; the next two wait with 16 prompt tokens; the third would make 31 waiting tokens.
  d.submit({request(0, 8, 4), request(1, 8, 4, 10), request(2, 8, 4, 20), request(3, 15, 4, 30)});
  d.run();
  const auto& rs = d.coordinator().requests();
  EXPECT_EQ(rs[0].state, RequestState::Finished);
  EXPECT_EQ(rs[1].state, RequestState::Finished);
  EXPECT_EQ(rs[2].state, RequestState::Finished);
  EXPECT_EQ(rs[3].state, RequestState::Rejected);
  EXPECT_NE(rs[3].reject_reason.find("16 prompt tokens waiting"), std::string::npos) << rs[3].reject_reason;
}

// Cancellation (a client that went away) under every policy: a running request finishes at its
// next sampled token with its KV pages freed, a waiting one leaves the queue at once, and the
// other requests lose no token and stay identical to a run without the cancellations.
TEST_F(CoordinatorTest, CancelFreesTheRequestAndTouchesNoOtherUnderEveryPolicy) {
  struct Reasons : RequestObserver {
    std::map<std::int64_t, FinishReason> finished;
    void on_request(const RequestUpdate& u) override {
      if (u.phase == RequestPhase::Finished) finished[u.id] = u.finish_reason;
    }
  };
  for (PolicyKind kind : {PolicyKind::Async, PolicyKind::Sync, PolicyKind::PingPong}) {
    SCOPED_TRACE(policy_name(kind));
    DeploymentOptions o = options(256, 2);
    o.policy.kind = kind;
    const Topology topo = Topology::colocated(weights_->config(), 1);
    const std::vector<RequestSpec> reqs = {request(0, 5, 12), request(1, 6, 12), request(2, 7, 12),
                                           request(3, 8, 12)};
    CpuDeployment plain(weights_, topo, o);
    plain.submit(reqs);
    plain.run();

    CpuDeployment d(weights_, topo, o);
    Reasons reasons;
    d.observers().add(nullptr, &reasons);
    d.submit(reqs);
    Coordinator& co = d.coordinator();
    std::int64_t pages_before = -1, pages_after = -1;
    bool cancelled = false;
    std::function<void()> probe = [&] {
      // Requests 0 and 1 run (two per rank), 2 and 3 wait; cancel 1 after its third token.
      if (!cancelled && co.requests()[1].output.size() >= 3) {
        EXPECT_EQ(co.requests()[3].state, RequestState::Waiting);
        pages_before = co.kv_pages_used();
        EXPECT_TRUE(co.cancel(1));
        EXPECT_TRUE(co.cancel(3));
        EXPECT_FALSE(co.cancel(3));  // no longer open
        cancelled = true;
      } else if (cancelled && pages_after < 0 && co.requests()[1].state == RequestState::Finished) {
        pages_after = co.kv_pages_used();  // 1's pages are gone, 2 took its place
      }
      if (!co.done()) d.loop().post(d.loop().now() + 1'000, probe);
    };
    d.loop().post(0, probe);
    d.run();
    ASSERT_TRUE(cancelled);
    EXPECT_EQ(reasons.finished[1], FinishReason::Cancelled);
    EXPECT_EQ(reasons.finished[3], FinishReason::Cancelled);
    EXPECT_EQ(reasons.finished[0], FinishReason::Length);
    EXPECT_EQ(reasons.finished[2], FinishReason::Length);
    EXPECT_LT(co.requests()[1].output.size(), 12u);
    EXPECT_TRUE(co.requests()[3].output.empty());
    EXPECT_GE(pages_before, 0);
    EXPECT_GE(pages_after, 0);
    EXPECT_EQ(co.kv_pages_used(), 0);
    for (int i : {0, 2}) EXPECT_EQ(co.requests()[i].output, plain.coordinator().requests()[i].output) << i;
  }
}

// A request's own sampling and stop tokens: it finishes at its stop token with reason Stop.
TEST_F(CoordinatorTest, PerRequestStopTokensAndSampling) {
  CpuDeployment plain(weights_, Topology::colocated(weights_->config(), 1), options(256, 4));
  plain.submit({request(0, 5, 8)});
  plain.run();
  const std::vector<std::int32_t> greedy = plain.coordinator().requests()[0].output;
  ASSERT_EQ(greedy.size(), 8u);

  CpuDeployment d(weights_, Topology::colocated(weights_->config(), 1), options(256, 4));
  RequestSpec stop = request(0, 5, 8);
  stop.stop_token_ids = {greedy[3]};
  RequestSpec sampled = request(1, 5, 8);
  sampled.prompt = stop.prompt;
  sampled.sampling = SamplingSpec{1.5f, 1.0f, 0, 1234};
  d.submit({stop, sampled});
  d.run();
  const auto& rs = d.coordinator().requests();
  const auto first = std::find(greedy.begin(), greedy.end(), greedy[3]);
  EXPECT_EQ(rs[0].output, std::vector<std::int32_t>(greedy.begin(), first + 1));
  EXPECT_EQ(rs[0].finish_reason, FinishReason::Stop);
  EXPECT_EQ(rs[1].output.size(), 8u);
  EXPECT_NE(rs[1].output, greedy);  // a hot temperature leaves the greedy path
  EXPECT_EQ(rs[1].finish_reason, FinishReason::Length);
}

}  // namespace
}  // namespace sy
