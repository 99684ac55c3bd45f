// Chunked prefill (CoordinatorOptions::max_num_batched_tokens): every pass of an attention rank
// keeps the budget, decodes first and prompts first come first served, a prompt never starves,
// and a chunked prompt gives the tokens, penalties, prompt log-probabilities and prefix cache of
// a whole one, under async and the grouped policies, through cancellations and policy switches.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/cpu/cpu_deployment.h"
#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

RuntimePolicy policy_of(PolicyKind kind, std::int32_t microbatches = 1) {
  RuntimePolicy p;
  p.kind = kind;
  p.microbatches = microbatches;
  return p;
}

struct NamedPolicy {
  std::string name;
  RuntimePolicy policy;
};

std::vector<NamedPolicy> policies() {
  return {{"async", policy_of(PolicyKind::Async)},
          {"sync", policy_of(PolicyKind::Sync)},
          {"pingpong-2", policy_of(PolicyKind::PingPong, 2)}};
}

// Every pass's rows, checked against the rules as they come: with a budget, decodes before
// prompt rows and the prompts in admission order; only the pass's last prompt cut short, no more rows than the budget
// unless the decodes alone reach it (then exactly one prompt row more); and a request's first
// token only after its whole prompt was fed.
class PassLog final : public RequestObserver {
 public:
  PassLog(const std::vector<RequestSpec>& requests, std::int32_t budget) : requests_(requests), budget_(budget) {}

  void on_request(const RequestUpdate& u) override {
    if (u.phase == RequestPhase::Admitted) admitted_[u.id] = next_admission_++;
    if (u.phase == RequestPhase::Admitted) fed_[u.id] = u.tokens_cached;
    if (u.phase == RequestPhase::Token && u.tokens_out == 1) {
      EXPECT_EQ(fed_[u.id], u.tokens_in) << "request " << u.id << " sampled before its whole prompt was fed";
    }
  }
  void on_pass(std::int32_t, std::span<const TokenRow> rows) override {
    ++passes;
    std::int64_t decodes = 0, prompt_rows = 0;
    std::vector<std::int64_t> prompts;  // request ids, in row order
    for (const TokenRow& row : rows) {
      const RequestSpec& spec = requests_[static_cast<std::size_t>(row.request)];
      const bool prompt = row.position < static_cast<std::int32_t>(spec.prompt.size()) && fed_[spec.id] <= row.position;
      if (!prompt) {
        if (budget_ > 0) {
          EXPECT_EQ(prompt_rows, 0) << "a decode row after prompt rows";
        }
        ++decodes;
        continue;
      }
      ++prompt_rows;
      fed_[spec.id] = row.position + 1;
      if (prompts.empty() || prompts.back() != spec.id) prompts.push_back(spec.id);
    }
    for (std::size_t i = 1; i < prompts.size(); ++i) {
      if (budget_ > 0) {
        EXPECT_LT(admitted_[prompts[i - 1]], admitted_[prompts[i]]) << "prompts out of admission order";
      }
      // Only the pass's last prompt may stop short of its end.
      EXPECT_EQ(fed_[prompts[i - 1]], static_cast<std::int32_t>(requests_[static_cast<std::size_t>(prompts[i - 1])].prompt.size()));
    }
    if (budget_ > 0) {
      if (decodes >= budget_) {
        EXPECT_LE(prompt_rows, 1) << "decodes fill the budget: one prompt row at most";
      } else {
        EXPECT_LE(decodes + prompt_rows, budget_);
      }
    }
    if (!prompts.empty() && fed_[prompts.back()] < static_cast<std::int32_t>(requests_[static_cast<std::size_t>(prompts.back())].prompt.size()))
      ++cut_passes;
    most_rows = std::max<std::int64_t>(most_rows, decodes + prompt_rows);
    if (decodes > 0 && prompt_rows > 0) ++mixed_passes;
  }

  std::int64_t passes = 0, cut_passes = 0, mixed_passes = 0, most_rows = 0;

 private:
  const std::vector<RequestSpec>& requests_;
  std::int32_t budget_;
  std::map<std::int64_t, std::int64_t> admitted_;
  std::map<std::int64_t, std::int32_t> fed_;  // prompt positions fed so far, by id
  std::int64_t next_admission_ = 0;
};

// The tokens sampler executions report: a non-final chunk of a prompt samples none.
struct SamplerTokens final : RuntimeObserver {
  void on_execution(std::int32_t, LayerKind kind, std::int32_t, std::int32_t, std::int32_t, std::int64_t tokens,
                    std::int64_t, std::int64_t) override {
    if (kind == LayerKind::Sampler) sampled += tokens;
  }
  std::int64_t sampled = 0;
};

class ChunkedPrefill : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sy_test_chunked_prefill_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    ASSERT_TRUE(write_random_model(preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32), 13, dir_).ok());
    weights_ = *ModelWeights::load(dir_);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Ids are indices; prompts of 3 to 40 tokens (longer ones every third), arrivals staggered so
  // that prompts arrive while others decode.
  static std::vector<RequestSpec> requests(std::int32_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<RequestSpec> out;
    for (std::int32_t i = 0; i < n; ++i) {
      RequestSpec r;
      r.id = i;
      r.external_id = std::to_string(i);
      r.arrival_ns = static_cast<std::int64_t>(i) * 40'000 + static_cast<std::int64_t>(rng() % 20'000);
      r.prompt.resize(i % 3 == 2 ? 25 + rng() % 16 : 3 + rng() % 12);
      for (auto& t : r.prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(weights_->config().vocab_size));
      r.max_new_tokens = 4 + static_cast<std::int32_t>(rng() % 6);
      out.push_back(std::move(r));
    }
    return out;
  }
  static DeploymentOptions options(const RuntimePolicy& policy, std::int32_t budget) {
    DeploymentOptions o;
    o.policy = policy;
    o.cost_model = std::make_shared<LinearCostModel>(20'000, 1'000);
    o.kv_pages_per_rank = 512;
    o.page_size = 4;
    o.coordinator.max_batch_per_rank = 8;
    o.coordinator.max_num_batched_tokens = budget;
    return o;
  }
  // Each request alone through the reference path, with its own sampling.
  static std::vector<std::vector<std::int32_t>> reference(const std::vector<RequestSpec>& reqs) {
    std::vector<std::vector<std::int32_t>> out;
    for (const RequestSpec& r : reqs) {
      GenerateOptions o;
      o.max_new_tokens = r.max_new_tokens;
      if (r.sampling) {
        o.sampling = {r.sampling->temperature, r.sampling->top_p, r.sampling->top_k, r.sampling->min_p};
        o.seed = r.sampling->seed;
        o.penalties = r.sampling->penalties();
      }
      ReferenceSession session(weights_, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
      auto tokens = generate(session, r.prompt, o);
      EXPECT_TRUE(tokens.ok());
      out.push_back(tokens.ok() ? *tokens : std::vector<std::int32_t>{});
    }
    return out;
  }
  static void expect_outputs(CpuDeployment& d, const std::vector<std::vector<std::int32_t>>& expected,
                             const std::string& what) {
    ASSERT_EQ(d.coordinator().requests().size(), expected.size()) << what;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const RequestRecord& r = d.coordinator().requests()[i];
      ASSERT_EQ(r.state, RequestState::Finished) << what << " request " << i;
      EXPECT_EQ(r.output, expected[i]) << what << " request " << i;
    }
  }

  static inline fs::path dir_;
  static inline std::shared_ptr<const ModelWeights> weights_;
};

// The budget per pass, decode rows first, prompts first come first served, a prompt advancing
// even when the decodes alone fill the budget (1), and greedy tokens those of the reference,
// which the run without a budget also gives.
TEST_F(ChunkedPrefill, EveryPassKeepsTheBudgetAndTheTokensStayTheReferences) {
  const std::vector<RequestSpec> reqs = requests(18, 3);
  const auto expected = reference(reqs);
  std::int64_t prompt_rows = 0;
  for (const RequestSpec& r : reqs) prompt_rows += static_cast<std::int64_t>(r.prompt.size());
  const Topology topology = Topology::disaggregated(weights_->config(), 2, 2);
  for (const NamedPolicy& p : policies()) {
    for (std::int32_t budget : {0, 1, 7, 64}) {
      const std::string what = p.name + " budget " + std::to_string(budget);
      SCOPED_TRACE(what);
      CpuDeployment d(weights_, topology, options(p.policy, budget));
      PassLog log(reqs, budget);
      SamplerTokens sampler;
      d.observers().add(&sampler, &log);
      d.submit(reqs);
      d.run();
      d.observers().remove(&sampler, &log);
      expect_outputs(d, expected, what);
      std::int64_t produced = 0;
      for (const auto& e : expected) produced += static_cast<std::int64_t>(e.size());
      EXPECT_EQ(sampler.sampled, produced) << "sampler executions counted chunks as tokens";
      EXPECT_EQ(d.coordinator().kv_pages_used(), 0);
      EXPECT_TRUE(d.cluster().quiescent());
      if (budget == 0) {
        EXPECT_EQ(log.cut_passes, 0) << "off: every prompt whole";
        EXPECT_GE(log.most_rows, 25) << "off: a long prompt in one pass";
      } else if (budget < 25) {
        EXPECT_GT(log.cut_passes, 0) << "no prompt was ever cut";
        EXPECT_GT(log.mixed_passes, 0) << "no pass carried decodes and a chunk together";
      }
      if (budget == 1) {
        EXPECT_GE(log.passes, prompt_rows) << "one prompt row per pass";
      }
    }
  }
}

// Drawn tokens under penalties (repetition reads the prompt, frequency and presence the outputs
// recorded by KvBlockManager::sampled, which must not see a chunk's draw) and seeded sampling:
// the reference's tokens at every budget, under async, pingpong and sync.
TEST_F(ChunkedPrefill, SeededSamplingAndPenaltiesMatchTheReference) {
  std::vector<RequestSpec> reqs = requests(12, 8);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    SamplingSpec s;
    s.seed = 500 + i;
    s.temperature = i % 4 == 0 ? 0.0f : 0.9f;
    s.repetition_penalty = i % 3 == 0 ? 1.3f : 1.0f;
    s.frequency_penalty = i % 2 == 0 ? 1.5f : 0.0f;
    s.presence_penalty = i % 5 == 1 ? 0.5f : 0.0f;
    reqs[i].sampling = s;
  }
  const auto expected = reference(reqs);
  const Topology topology = Topology::disaggregated(weights_->config(), 2, 2);
  for (const NamedPolicy& p : policies()) {
    for (std::int32_t budget : {1, 7, 64}) {
      CpuDeployment d(weights_, topology, options(p.policy, budget));
      d.submit(reqs);
      d.run();
      expect_outputs(d, expected, p.name + " budget " + std::to_string(budget));
    }
  }
}

// A shared system prompt: chunks of it are cached only once the whole prompt is written (the
// first token), later prompts take them, and every token is the reference's.
TEST_F(ChunkedPrefill, PrefixCachingTakesWhatChunkedPromptsWrote) {
  std::vector<RequestSpec> reqs = requests(10, 21);
  std::mt19937_64 rng(4);
  std::vector<std::int32_t> system(24);
  for (auto& t : system) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(weights_->config().vocab_size));
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt.insert(reqs[i].prompt.begin(), system.begin(), system.end());
    reqs[i].arrival_ns = static_cast<std::int64_t>(i) * 2'000'000;
  }
  const auto expected = reference(reqs);
  for (const NamedPolicy& p : policies()) {
    DeploymentOptions o = options(p.policy, 5);
    o.coordinator.prefix_caching = true;
    CpuDeployment d(weights_, Topology::colocated(weights_->config(), 1), o);
    d.submit(reqs);
    d.run();
    expect_outputs(d, expected, p.name);
    EXPECT_GT(d.coordinator().prefix_cache_hits(), 0) << p.name;
    EXPECT_EQ(d.coordinator().kv_pages_used(), 0) << p.name;
  }
}

// Prompt log-probabilities of a prompt fed in chunks: every position once, in order, before the
// first token, with the numbers of the whole prompt.
TEST_F(ChunkedPrefill, PromptLogprobsComeCompleteAndInOrder) {
  struct Scores final : RequestObserver {
    void on_request(const RequestUpdate& u) override {
      if (u.phase == RequestPhase::Token) tokens[u.id] += 1;
    }
    void on_prompt_logprobs(std::int64_t id, const PromptLogprobs& p) override {
      auto& all = by_id[id];
      EXPECT_EQ(p.first_position, static_cast<std::int32_t>(all.size()) + 1) << "request " << id;
      EXPECT_EQ(tokens[id], 0) << "after the first token";
      all.insert(all.end(), p.tokens.begin(), p.tokens.end());
      runs[id] += 1;
    }
    std::map<std::int64_t, std::vector<kernels::TokenLogprobs>> by_id;
    std::map<std::int64_t, int> runs, tokens;
  };
  std::vector<RequestSpec> reqs = requests(6, 17);
  for (RequestSpec& r : reqs) {
    SamplingSpec s;
    s.prompt_logprobs = 2;
    r.sampling = s;
  }
  const Topology topology = Topology::disaggregated(weights_->config(), 2, 2);
  for (const NamedPolicy& p : policies()) {
    Scores whole, chunked;
    for (auto [budget, scores] : {std::pair{0, &whole}, std::pair{4, &chunked}}) {
      CpuDeployment d(weights_, topology, options(p.policy, budget));
      d.observers().add(nullptr, scores);
      d.submit(reqs);
      d.run();
      d.observers().remove(nullptr, scores);
    }
    for (const RequestSpec& r : reqs) {
      const auto& a = chunked.by_id[r.id];
      const auto& b = whole.by_id[r.id];
      ASSERT_EQ(a.size(), r.prompt.size() - 1) << p.name << " request " << r.id;
      ASSERT_EQ(b.size(), a.size());
      if (r.prompt.size() > 5) {
        EXPECT_GT(chunked.runs[r.id], 1) << p.name << ": the prompt came whole";
      }
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].token, r.prompt[i + 1]);
        EXPECT_NEAR(a[i].logprob, b[i].logprob, 1e-4) << p.name << " request " << r.id << " position " << i + 1;
        EXPECT_EQ(a[i].rank, b[i].rank);
      }
    }
  }
}

// A request cancelled between two chunks of its prompt finishes Cancelled with no token, its
// pages freed, and the others keep their tokens.
TEST_F(ChunkedPrefill, CancelMidPrefillFreesItsPages) {
  std::vector<RequestSpec> reqs = requests(4, 5);
  reqs[1].prompt.resize(60, 7);  // the long one, cancelled mid-way
  const auto expected = reference(reqs);
  for (const NamedPolicy& p : policies()) {
    CpuDeployment d(weights_, Topology::colocated(weights_->config(), 1), options(p.policy, 4));
    d.submit(reqs);
    Coordinator& co = d.coordinator();
    bool cancelled = false;
    std::function<void()> probe = [&] {
      const RequestRecord& r = co.requests()[1];
      if (!cancelled && r.state == RequestState::Running && r.prefilled > 8) {
        EXPECT_TRUE(r.output.empty());
        EXPECT_TRUE(co.cancel(1));
        cancelled = true;
      }
      if (!co.done()) d.loop().post(d.loop().now() + 1'000, probe);
    };
    d.loop().post(0, probe);
    d.run();
    ASSERT_TRUE(cancelled) << p.name;
    EXPECT_EQ(co.requests()[1].finish_reason, FinishReason::Cancelled) << p.name;
    EXPECT_TRUE(co.requests()[1].output.empty()) << p.name;
    EXPECT_LT(co.requests()[1].prefilled, 60) << p.name << ": the whole prompt was fed after the cancel";
    EXPECT_EQ(co.kv_pages_used(), 0) << p.name;
    for (std::size_t i : {0u, 2u, 3u}) EXPECT_EQ(co.requests()[i].output, expected[i]) << p.name << " request " << i;
  }
}

// With prefix caching, a prompt cancelled between two chunks caches only the pages it wrote: the
// same prompt arriving later takes no more than was fed and gets the reference's tokens (before
// the fix its whole prompt was cached, unwritten pages and all, and the retry answered garbage).
TEST_F(ChunkedPrefill, CancelMidPrefillCachesOnlyWhatWasWritten) {
  std::vector<RequestSpec> reqs = requests(2, 5);
  std::mt19937_64 rng(99);
  std::vector<std::int32_t> prompt(60);
  for (auto& t : prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(weights_->config().vocab_size));
  reqs[0].prompt = prompt;
  reqs[0].arrival_ns = 0;
  reqs[1].prompt = prompt;  // the retry, long after
  reqs[1].arrival_ns = 50'000'000;
  const auto expected = reference(reqs);
  for (const NamedPolicy& p : policies()) {
    DeploymentOptions o = options(p.policy, 4);
    o.coordinator.prefix_caching = true;
    CpuDeployment d(weights_, Topology::colocated(weights_->config(), 1), o);
    d.submit(reqs);
    Coordinator& co = d.coordinator();
    bool cancelled = false;
    std::function<void()> probe = [&] {
      const RequestRecord& r = co.requests()[0];
      if (!cancelled && r.state == RequestState::Running && r.prefilled > 8) {
        EXPECT_TRUE(co.cancel(0));
        cancelled = true;
      }
      if (!co.done()) d.loop().post(d.loop().now() + 1'000, probe);
    };
    d.loop().post(0, probe);
    d.run();
    ASSERT_TRUE(cancelled) << p.name;
    EXPECT_EQ(co.requests()[0].finish_reason, FinishReason::Cancelled) << p.name;
    EXPECT_LT(co.requests()[0].prefilled, 60) << p.name;
    EXPECT_LE(co.requests()[1].cached_positions, co.requests()[0].prefilled) << p.name << ": cached more than was written";
    EXPECT_EQ(co.requests()[1].output, expected[1]) << p.name;
    EXPECT_EQ(co.kv_pages_used(), 0) << p.name;
  }
}

// Policy switches applied while prompts are between chunks (async -> pingpong -> sync -> async):
// no token lost or duplicated, each the reference's.
TEST_F(ChunkedPrefill, PolicySwitchesMidPrefillLoseNothing) {
  std::vector<RequestSpec> reqs = requests(12, 31);
  for (RequestSpec& r : reqs) r.prompt.resize(r.prompt.size() + 20, 3);
  const auto expected = reference(reqs);
  CpuDeployment d(weights_, Topology::disaggregated(weights_->config(), 2, 2), options(policy_of(PolicyKind::Async), 6));
  d.submit(reqs);
  Coordinator& co = d.coordinator();
  const std::vector<RuntimePolicy> next = {policy_of(PolicyKind::PingPong, 2), policy_of(PolicyKind::Sync),
                                           policy_of(PolicyKind::Async)};
  std::size_t asked = 0;
  int mid_prefill_at_switch = 0;
  const auto mid_prefill = [&] {
    int n = 0;
    for (const RequestRecord& r : co.requests())
      if (r.state == RequestState::Running && r.output.empty() && r.prefilled > 0 &&
          r.prefilled < static_cast<std::int32_t>(r.spec.prompt.size()))
        ++n;
    return n;
  };
  std::function<void()> probe = [&] {
    if (asked < next.size() && !co.switching() && mid_prefill() > 0) {
      ASSERT_TRUE(co.request_policy(next[asked], [&](std::int64_t) { mid_prefill_at_switch += mid_prefill(); }).ok());
      ++asked;
    }
    if (!co.done()) d.loop().post(d.loop().now() + 7'000, probe);
  };
  d.loop().post(0, probe);
  d.run();
  EXPECT_EQ(asked, next.size());
  EXPECT_EQ(co.policy_switches(), static_cast<std::int64_t>(next.size()));
  EXPECT_GT(mid_prefill_at_switch, 0) << "no switch found a prompt between two chunks";
  expect_outputs(d, expected, "switching");
}

}  // namespace
}  // namespace sy
