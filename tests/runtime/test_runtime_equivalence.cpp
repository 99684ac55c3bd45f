// The expert-parallel runtime against the single-request reference path: for every policy and
// the shipped layouts, with 1 to 64 concurrent requests, top-k of 1, 2 and 4, random arrival
// orders, and policy switches in the middle of a run, greedy outputs are identical, on virtual
// time and on the wall clock (every device on a thread of its own).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <random>
#include <string>

#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"
#include "engine/runtime/layout_parser.h"
#include "engine/cpu/cpu_deployment.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

struct ModelCase {
  Arch arch;
  std::int32_t top_k;
};

std::string case_name(const ModelCase& c) { return arch_name(c.arch) + "_top" + std::to_string(c.top_k); }

std::vector<RequestSpec> make_requests(std::int32_t n, std::int32_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<RequestSpec> out;
  for (std::int32_t i = 0; i < n; ++i) {
    RequestSpec r;
    r.id = i;
    r.external_id = std::to_string(i);
    r.arrival_ns = static_cast<std::int64_t>(rng() % 3'000'000);
    r.prompt.resize(1 + rng() % 24);
    for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(vocab));
    r.max_new_tokens = 1 + static_cast<std::int32_t>(rng() % 12);
    out.push_back(std::move(r));
  }
  return out;
}

RuntimePolicy async_policy(const std::string& scheduler) {
  RuntimePolicy p;
  p.kind = PolicyKind::Async;
  p.scheduler.name = scheduler;
  return p;
}
RuntimePolicy pingpong(std::int32_t m) {
  RuntimePolicy p;
  p.kind = PolicyKind::PingPong;
  p.microbatches = m;
  return p;
}
RuntimePolicy findep(std::int32_t r1, std::int32_t r2, SharedExpertOrder order = SharedExpertOrder::Asas) {
  RuntimePolicy p;
  p.kind = PolicyKind::FinDep;
  p.microbatches = r1;
  p.expert_chunks = r2;
  p.order = order;
  return p;
}

// The attention devices' executions in order: attention, shared expert (findep) and merges.
struct AttentionSideLog final : RuntimeObserver {
  struct Run {
    std::int32_t device, block, group;
    bool shared;
  };
  std::vector<Run> runs;
  std::int64_t shared_rows = 0;
  void on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t, std::int32_t group,
                    std::int64_t, std::int64_t, std::int64_t) override {
    if (kind == LayerKind::Attention) runs.push_back({device, block, group, false});
  }
  void on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group, std::int64_t tokens,
                        std::int64_t, std::int64_t) override {
    runs.push_back({device, block, group, true});
    shared_rows += tokens;
  }
};
RuntimePolicy sync_policy() {
  RuntimePolicy p;
  p.kind = PolicyKind::Sync;
  return p;
}

class RuntimeEquivalence : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sy_test_runtime_" + case_name(GetParam()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ModelConfig config = preset_config(GetParam().arch, ModelPreset::Tiny, kernels::DType::F32);
    config.top_k = GetParam().top_k;
    ASSERT_TRUE(write_random_model(config, 11, dir_).ok());
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = *w;
    requests_ = make_requests(64, weights_->config().vocab_size, 5);
    expected_ = reference_outputs(requests_);
  }
  // Each request served alone by the reference path.
  std::vector<std::vector<std::int32_t>> reference_outputs(const std::vector<RequestSpec>& requests) const {
    std::vector<std::vector<std::int32_t>> out;
    for (const RequestSpec& r : requests) {
      ReferenceSession session(weights_, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
      GenerateOptions options;
      options.max_new_tokens = r.max_new_tokens;
      auto tokens = generate(session, r.prompt, options);
      EXPECT_TRUE(tokens.ok());
      out.push_back(tokens.ok() ? *tokens : std::vector<std::int32_t>{});
    }
    return out;
  }
  void TearDown() override { fs::remove_all(dir_); }

  DeploymentOptions options(const RuntimePolicy& policy, std::uint64_t jitter_seed,
                            Clock clock = Clock::Virtual) const {
    DeploymentOptions o;
    o.clock = clock;
    o.policy = policy;
    o.cost_model = std::make_shared<LinearCostModel>(20'000, 1'000);
    o.link = LinkModel{5'000, 10.0, 40'000, jitter_seed};  // jitter shuffles arrival orders
    o.kv_pages_per_rank = 512;
    o.page_size = 4;
    return o;
  }

  // Serves the first n requests and checks every output against the reference.
  void expect_reference_outputs(CpuDeployment& d, std::int32_t n, const std::string& what) {
    d.submit(std::vector<RequestSpec>(requests_.begin(), requests_.begin() + n));
    d.run();
    ASSERT_EQ(d.coordinator().requests().size(), static_cast<std::size_t>(n));
    for (std::int32_t i = 0; i < n; ++i) {
      const RequestRecord& r = d.coordinator().requests()[i];
      ASSERT_EQ(r.state, RequestState::Finished) << what << " request " << i;
      EXPECT_EQ(r.output, expected_[i]) << what << " request " << i;
    }
    EXPECT_TRUE(d.cluster().quiescent()) << what;
  }

  fs::path dir_;
  std::shared_ptr<const ModelWeights> weights_;
  std::vector<RequestSpec> requests_;
  std::vector<std::vector<std::int32_t>> expected_;
};

TEST_P(RuntimeEquivalence, EveryPolicyOnBothPlacementsMatchesTheReference) {
  const ModelConfig& c = weights_->config();
  // The shipped layout files themselves, as an operator would deploy them.
  std::vector<std::pair<std::string, Topology>> placements;
  for (const std::string name : {"colocated-4", "disaggregated-2a4e", "replicated-2a4e"}) {
    auto layout = load_layout(fs::path(SY_SOURCE_DIR) / "layouts" / (name + ".toml"), c);
    ASSERT_TRUE(layout.ok()) << layout.status().message();
    placements.emplace_back(name, Topology::from_layout(*layout, c));
  }
  const std::vector<std::pair<std::string, RuntimePolicy>> policies = {
      {"async/defrag", async_policy("defrag")}, {"async/mtfs", async_policy("mtfs")},
      {"async/flfs", async_policy("flfs")},     {"pingpong-2", pingpong(2)},
      {"pingpong-3", pingpong(3)},              {"sync", sync_policy()},
      {"findep-2x3", findep(2, 3)},            {"findep-3x2-aass", findep(3, 2, SharedExpertOrder::Aass)}};
  std::uint64_t seed = 1;
  for (const auto& [pname, topology] : placements) {
    for (const auto& [policy_name, policy] : policies) {
      for (std::int32_t n : {1, 64}) {
        CpuDeployment d(weights_, topology, options(policy, seed++));
        expect_reference_outputs(d, n, pname + " " + policy_name + " n=" + std::to_string(n));
      }
      // On the wall clock the devices run concurrently and batches form as timing allows.
      CpuDeployment d(weights_, topology, options(policy, seed++, Clock::Wall));
      expect_reference_outputs(d, 64, pname + " " + policy_name + " wall clock");
    }
  }
}

// Drawn tokens with min-p, OpenAI's penalties and logit bias and vLLM's repetition penalty (on
// the prompt's tokens too): every request's tokens are the reference's
// with the same seed and settings, under async and pingpong, on virtual time and the wall
// clock; the penalties' counts live on the attention rank (KvBlockManager::sampled). Greedy
// requests under the largest frequency penalty repeat tokens less than without it.
TEST_P(RuntimeEquivalence, MinPAndPenaltiesMatchTheReference) {
  const ModelConfig& c = weights_->config();
  std::vector<RequestSpec> requests = make_requests(24, c.vocab_size, 9);
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SamplingSpec s;
    s.seed = 1000 + i;
    if (i % 3 == 0) {
      s.frequency_penalty = 2.0f;  // greedy: no token twice
    } else {
      s.temperature = 0.8f + 0.1f * static_cast<float>(i % 4);
      s.min_p = i % 2 == 0 ? 0.05f : 0.0f;
      s.top_p = i % 5 == 0 ? 0.9f : 1.0f;
      s.presence_penalty = 0.5f * static_cast<float>(i % 3) - 0.5f;
      s.frequency_penalty = i % 4 == 0 ? 1.5f : 0.0f;
      s.repetition_penalty = i % 7 == 1 ? 1.3f : i % 7 == 4 ? 0.8f : 1.0f;
    }
    requests[i].sampling = s;
    requests[i].max_new_tokens = 12 + static_cast<std::int32_t>(i % 5);
    if (i % 6 == 2)
      requests[i].logit_bias = {{static_cast<std::int32_t>(i * 7) % c.vocab_size, 3.0f},
                                {static_cast<std::int32_t>(i * 11) % c.vocab_size, -2.0f}};
  }
  std::vector<std::vector<std::int32_t>> expected, unpenalized;
  for (const RequestSpec& r : requests) {
    const SamplingSpec& s = *r.sampling;
    GenerateOptions o;
    o.max_new_tokens = r.max_new_tokens;
    o.sampling = {s.temperature, s.top_p, s.top_k, s.min_p};
    o.seed = s.seed;
    o.penalties = s.penalties();
    o.logit_bias = r.logit_bias;
    ReferenceSession session(weights_, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
    expected.push_back(*generate(session, r.prompt, o));
    o.penalties = {};
    o.logit_bias.clear();
    ReferenceSession plain(weights_, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
    unpenalized.push_back(*generate(plain, r.prompt, o));
  }
  // Tokens that are repeats of an earlier one in the same output.
  auto repeats = [](std::vector<std::int32_t> tokens) {
    const std::size_t n = tokens.size();
    std::sort(tokens.begin(), tokens.end());
    return static_cast<int>(n - static_cast<std::size_t>(std::unique(tokens.begin(), tokens.end()) - tokens.begin()));
  };
  int repeats_with = 0, repeats_without = 0, changed = 0;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    changed += expected[i] != unpenalized[i] ? 1 : 0;
    if (i % 3 != 0) continue;
    repeats_with += repeats(expected[i]);
    repeats_without += repeats(unpenalized[i]);
  }
  EXPECT_LT(repeats_with, repeats_without) << "greedy outputs under frequency_penalty 2 repeat as much as without";
  EXPECT_GT(changed, 4) << "the penalties changed almost no output";

  const Topology topology = Topology::disaggregated(c, 2, 4);
  std::uint64_t seed = 77;
  for (const auto& [name, policy] : std::vector<std::pair<std::string, RuntimePolicy>>{
           {"async/defrag", async_policy("defrag")}, {"pingpong-2", pingpong(2)}}) {
    for (const Clock clock : {Clock::Virtual, Clock::Wall}) {
      CpuDeployment d(weights_, topology, options(policy, seed++, clock));
      d.submit(requests);
      d.run();
      ASSERT_EQ(d.coordinator().requests().size(), requests.size());
      for (std::size_t i = 0; i < requests.size(); ++i) {
        const RequestRecord& r = d.coordinator().requests()[i];
        ASSERT_EQ(r.state, RequestState::Finished) << name << " request " << i;
        EXPECT_EQ(r.output, expected[i]) << name << (clock == Clock::Wall ? " wall clock" : "") << " request " << i;
      }
    }
  }
}

// Prefix caching: prompts that share a system prefix (and some that repeat whole) compute only
// what the rank's cache lacks, and every output is still the reference's, under every kind of
// policy, on both placements and on the wall clock; no page stays referenced at the end.
TEST_P(RuntimeEquivalence, PrefixCachingComputesOnlyWhatIsNotCachedAndMatchesTheReference) {
  const ModelConfig& c = weights_->config();
  std::mt19937_64 rng(17);
  std::vector<std::int32_t> system(13);
  for (auto& t : system) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(c.vocab_size));
  std::vector<RequestSpec> requests;
  for (std::int32_t i = 0; i < 40; ++i) {
    RequestSpec r;
    r.id = i;
    r.external_id = std::to_string(i);
    r.arrival_ns = i * 2'000'000;  // later ones find the earlier prompts cached
    r.prompt = system;
    if (i % 5 == 4) {
      r.prompt = requests[static_cast<std::size_t>(i - 1)].prompt;  // a repeat, whole
    } else {
      const std::size_t extra = 1 + rng() % 10;
      for (std::size_t k = 0; k < extra; ++k)
        r.prompt.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(c.vocab_size)));
    }
    r.max_new_tokens = 1 + static_cast<std::int32_t>(rng() % 8);
    requests.push_back(std::move(r));
  }
  const std::vector<std::vector<std::int32_t>> expected = reference_outputs(requests);
  const std::vector<std::pair<std::string, RuntimePolicy>> policies = {
      {"async/defrag", async_policy("defrag")}, {"pingpong-2", pingpong(2)}, {"sync", sync_policy()},
      {"findep-2x3", findep(2, 3)}};
  std::uint64_t seed = 7;
  // 512 pages of 4 keep every prompt; 16 (a request needs up to 8) evict cached pages all along,
  // so a page is reused for other content while its old content is still indexed elsewhere.
  for (const std::int32_t pages : {512, 16})
  for (const Topology& topology : {Topology::colocated(c, 2), Topology::disaggregated(c, 2, 4)}) {
    for (const auto& [name, policy] : policies) {
      for (const Clock clock : {Clock::Virtual, Clock::Wall}) {
        const std::string what = name + (topology.num_ranks() == 2 && topology.num_devices == 2 ? " colocated" : " disaggregated") +
                                 " " + std::string(clock_name(clock)) + ", " + std::to_string(pages) + " pages";
        DeploymentOptions o = options(policy, seed++, clock);
        o.kv_pages_per_rank = pages;
        o.coordinator.prefix_caching = true;
        CpuDeployment d(weights_, topology, o);
        d.submit(requests);
        d.run();
        for (std::size_t i = 0; i < requests.size(); ++i) {
          const RequestRecord& r = d.coordinator().requests()[i];
          ASSERT_EQ(r.state, RequestState::Finished) << what << " request " << i;
          EXPECT_EQ(r.output, expected[i]) << what << " request " << i << " (" << r.cached_positions << " positions cached)";
        }
        const Coordinator& co = d.coordinator();
        EXPECT_GT(co.prefix_cache_hits(), 0) << what;
        EXPECT_LT(co.prefix_cache_hits(), co.prefix_cache_queries()) << what;
        EXPECT_EQ(co.kv_pages_used(), 0) << what;
        EXPECT_TRUE(d.cluster().quiescent()) << what;
        std::int64_t evictions = 0;
        for (std::int32_t rank = 0; rank < topology.num_ranks(); ++rank) evictions += d.cluster().kv(rank).prefix_evictions();
        if (pages == 16) {
          EXPECT_GT(evictions, 0) << what;
        }
      }
    }
  }
}

// A conversation's next turn: its prompt is the last turn's prompt and answer and a new message.
// The finished turn left its prompt and every output it fed back cached, so the next turn
// computes only the new message (and the page it starts in).
TEST_P(RuntimeEquivalence, PrefixCachingServesTheNextTurnFromThePreviousAnswer) {
  const ModelConfig& c = weights_->config();
  RequestSpec first;
  first.id = 0;
  first.external_id = "0";
  for (std::int32_t i = 0; i < 30; ++i) first.prompt.push_back((i * 31 + 7) % c.vocab_size);
  first.max_new_tokens = 12;
  const std::vector<std::int32_t> answer = reference_outputs({first})[0];
  ASSERT_EQ(answer.size(), 12u);
  RequestSpec next;
  next.id = 1;
  next.external_id = "1";
  next.arrival_ns = 500'000'000;  // after the first turn
  next.prompt = first.prompt;
  next.prompt.insert(next.prompt.end(), answer.begin(), answer.end());
  for (std::int32_t i = 0; i < 5; ++i) next.prompt.push_back((i * 17 + 3) % c.vocab_size);
  next.max_new_tokens = 6;
  const auto expected = reference_outputs({first, next});
  for (const auto& [name, policy] : std::vector<std::pair<std::string, RuntimePolicy>>{
           {"async/defrag", async_policy("defrag")}, {"sync", sync_policy()}}) {
    DeploymentOptions o = options(policy, 3);
    o.coordinator.prefix_caching = true;
    CpuDeployment d(weights_, Topology::disaggregated(c, 1, 2), o);
    d.submit({first, next});
    d.run();
    const auto& records = d.coordinator().requests();
    EXPECT_EQ(records[0].output, expected[0]) << name;
    EXPECT_EQ(records[1].output, expected[1]) << name;
    // 30 prompt tokens and 11 answers fed back: 41 positions written, ten whole pages of 4.
    EXPECT_EQ(records[1].cached_positions, 40) << name;
    EXPECT_EQ(d.coordinator().kv_pages_used(), 0) << name;
  }
}

TEST_P(RuntimeEquivalence, PolicySwitchesMidRunLoseAndDuplicateNothing) {
  const ModelConfig& c = weights_->config();
  for (const auto& [clock, interval] : {std::pair{Clock::Virtual, std::int64_t{1'000'000}},
                                        std::pair{Clock::Wall, std::int64_t{100'000}}})
  for (const Topology& topology : {Topology::colocated(c, 4), Topology::disaggregated(c, 2, 4)}) {
    CpuDeployment d(weights_, topology, options(async_policy("defrag"), 99, clock));
    // Switch while requests are mid-generation: async -> pingpong(3) -> findep(2, 3) -> sync ->
    // findep(3, 2) -> pingpong(2) -> async/flfs. Each switch is requested `interval` (1 ms of virtual time, 0.1 ms of wall
    // time) after the previous one took effect (a request made while another is pending
    // replaces it), and only while requests are still being served.
    const std::vector<RuntimePolicy> sequence = {pingpong(3), findep(2, 3), sync_policy(),
                                                 findep(3, 2, SharedExpertOrder::Aass), pingpong(2), async_policy("flfs")};
    std::size_t requested = 0;
    std::function<void()> tick = [&] {
      Coordinator& co = d.coordinator();
      if (requested < sequence.size() && co.policy_switches() == static_cast<std::int64_t>(requested)) {
        ASSERT_GT(co.open_requests(), 0) << "the run ended before switch " << requested;
        ASSERT_TRUE(co.request_policy(sequence[requested]).ok());
        ++requested;
      }
      if (co.policy_switches() < static_cast<std::int64_t>(sequence.size())) d.loop().post(d.loop().now() + interval, tick);
    };
    d.loop().post(interval, tick);
    expect_reference_outputs(d, 64, std::string("with switches, ") + std::string(clock_name(clock)) + " clock");
    EXPECT_EQ(d.coordinator().policy_switches(), 6);
    EXPECT_EQ(d.coordinator().policy().kind, PolicyKind::Async);
  }
}

TEST_P(RuntimeEquivalence, FindepRunsTheSharedExpertApartInItsOrder) {
  const ModelConfig& c = weights_->config();
  for (const SharedExpertOrder order : {SharedExpertOrder::Asas, SharedExpertOrder::Aass}) {
    const std::string what = order == SharedExpertOrder::Asas ? "ASAS" : "AASS";
    CpuDeployment d(weights_, Topology::disaggregated(c, 2, 4), options(findep(3, 2, order), 7));
    AttentionSideLog log;
    d.observers().add(&log, nullptr);
    expect_reference_outputs(d, 64, "findep " + what);
    if (!c.has_shared_expert()) {
      EXPECT_EQ(log.shared_rows, 0) << what;
      continue;
    }
    // Every sparse block's attention rows ran through a shared-expert execution of their own.
    ASSERT_GT(log.shared_rows, 0) << what;
    std::int32_t interleaved = 0;  // shared experts that ran after a later attention (AASS)
    for (std::size_t i = 0; i < log.runs.size(); ++i) {
      const auto& s = log.runs[i];
      if (!s.shared) continue;
      // The latest execution of this device before it.
      std::size_t j = i;
      while (j > 0 && log.runs[j - 1].device != s.device) --j;
      ASSERT_GT(j, 0u) << what << ": a shared expert before any attention";
      const auto& prev = log.runs[j - 1];
      const bool own_attention = !prev.shared && prev.block == s.block && prev.group == s.group;
      if (order == SharedExpertOrder::Asas) {
        EXPECT_TRUE(own_attention) << what << ": shared expert of block " << s.block << " group " << s.group
                                   << " does not follow its attention";
      } else if (!own_attention) {
        ++interleaved;
      }
    }
    if (order == SharedExpertOrder::Aass) {
      EXPECT_GT(interleaved, 0) << "AASS never ran attention first";
    }
    d.observers().remove(&log, nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RuntimeEquivalence,
                         ::testing::Values(ModelCase{Arch::Mixtral, 1}, ModelCase{Arch::Mixtral, 2},
                                           ModelCase{Arch::Mixtral, 4}, ModelCase{Arch::Qwen2Moe, 2},
                                           ModelCase{Arch::Qwen3Moe, 4}, ModelCase{Arch::Olmoe, 2}),
                         [](const auto& p) { return case_name(p.param); });

}  // namespace
}  // namespace sy
