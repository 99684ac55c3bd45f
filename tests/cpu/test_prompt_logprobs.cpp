// Prompt log-probabilities (SamplingSpec::prompt_logprobs) on the cpu backend: against Hugging
// Face transformers' logits of every prompt position (tests/golden/data), with prefix caching on,
// and a prompt scored in chunks by the sample execution as it is whole.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cpu/cpu_deployment.h"
#include "engine/cpu/virtual_stream.h"
#include "engine/runtime/virtual_event_loop.h"
#include "engine/util/npy.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
const fs::path kData = fs::path(SY_SOURCE_DIR) / "tests/golden/data";

// What the coordinator reports of each request's prompt, by RequestSpec::id: the runs joined
// (each must continue the last), and how many runs came.
class PromptScores final : public RequestObserver {
 public:
  void on_request(const RequestUpdate& u) override {
    if (u.phase == RequestPhase::Token) tokens_seen[u.id] += 1;
  }
  void on_prompt_logprobs(std::int64_t id, const PromptLogprobs& p) override {
    std::vector<kernels::TokenLogprobs>& all = by_id[id];
    EXPECT_EQ(p.first_position, static_cast<std::int32_t>(all.size()) + 1) << "request " << id;
    EXPECT_EQ(tokens_seen[id], 0) << "prompt log-probabilities come before the request's first token";
    all.insert(all.end(), p.tokens.begin(), p.tokens.end());
  }
  std::map<std::int64_t, std::vector<kernels::TokenLogprobs>> by_id;
  std::map<std::int64_t, std::int32_t> tokens_seen;
};

std::vector<double> log_softmax(const float* logits, std::int64_t vocab) {
  double max = -INFINITY, total = 0;
  for (std::int64_t v = 0; v < vocab; ++v) max = std::max(max, static_cast<double>(logits[v]));
  for (std::int64_t v = 0; v < vocab; ++v) total += std::exp(static_cast<double>(logits[v]) - max);
  std::vector<double> out(static_cast<std::size_t>(vocab));
  for (std::int64_t v = 0; v < vocab; ++v) out[static_cast<std::size_t>(v)] = logits[v] - max - std::log(total);
  return out;
}

RequestSpec request(std::int64_t id, std::vector<std::int32_t> prompt, std::int32_t prompt_logprobs,
                    std::int64_t arrival_ns = 0) {
  RequestSpec r;
  r.id = id;
  r.external_id = std::to_string(id);
  r.arrival_ns = arrival_ns;
  r.prompt = std::move(prompt);
  r.max_new_tokens = 2;
  SamplingSpec s;  // greedy
  s.prompt_logprobs = prompt_logprobs;
  r.sampling = s;
  return r;
}

class PromptLogprobsGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    dir_ = kData / GetParam();
    std::ifstream in(dir_ / "golden.json");
    ASSERT_TRUE(in) << "missing " << (dir_ / "golden.json");
    golden_ = nlohmann::json::parse(in);
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    weights_ = *w;
  }

  // Every golden prompt as one request asking for `k` alternatives (and one that asks for
  // nothing beside each), served by a deployment of two attention ranks and two expert devices.
  PromptScores serve(std::int32_t k, PolicyKind policy = PolicyKind::Async) {
    DeploymentOptions o;
    o.policy.kind = policy;
    o.kv_pages_per_rank = 256;
    o.page_size = 4;
    CpuDeployment d(weights_, Topology::disaggregated(weights_->config(), 2, 2), o);
    PromptScores scores;
    d.observers().add(nullptr, &scores);
    std::vector<RequestSpec> requests;
    std::int64_t id = 0;
    for (const auto& p : golden_["prompts"]) {
      requests.push_back(request(id++, p["tokens"].get<std::vector<std::int32_t>>(), k));
      requests.push_back(request(id++, p["tokens"].get<std::vector<std::int32_t>>(), -1));
    }
    d.submit(requests);
    d.run();
    d.observers().remove(nullptr, &scores);
    for (const RequestRecord& r : d.coordinator().requests()) EXPECT_EQ(r.state, RequestState::Finished);
    return scores;
  }

  // Each asking request's numbers against transformers' logits (below).
  void check_against_goldens(const PromptScores& scores, std::int32_t k);

  fs::path dir_;
  nlohmann::json golden_;
  std::shared_ptr<const ModelWeights> weights_;
};

// Each prompt token's log-probability is the log_softmax of transformers' logits at the position
// before it, within test_golden's f32 tolerance (1e-4 of the logit spread per logit, so twice
// that per log-probability); the alternatives are the golden's most likely tokens, their ranks
// count the golden tokens at least as likely. Under every policy: the sampler's rows come
// whole or in micro-batches, beside requests that do not ask.
TEST_P(PromptLogprobsGolden, MatchTransformersLogSoftmax) {
  for (const PolicyKind policy : {PolicyKind::Async, PolicyKind::PingPong, PolicyKind::Sync}) {
    SCOPED_TRACE(std::string("policy ") + (policy == PolicyKind::Async      ? "async"
                                           : policy == PolicyKind::PingPong ? "pingpong"
                                                                            : "sync"));
    check_against_goldens(serve(5, policy), 5);
  }
}

void PromptLogprobsGolden::check_against_goldens(const PromptScores& scores, std::int32_t k) {
  const std::int64_t vocab = weights_->config().vocab_size;
  std::int64_t id = 0;
  for (const auto& prompt : golden_["prompts"]) {
    const std::vector<std::int32_t> tokens = prompt["tokens"];
    auto expected = read_npy(dir_ / prompt["logits"].get<std::string>());
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    const double tol = 2e-4 * prompt["logit_std"].get<double>() + 1e-6;
    ASSERT_TRUE(scores.by_id.contains(id)) << "request " << id << " asked and got nothing";
    EXPECT_FALSE(scores.by_id.contains(id + 1)) << "request " << id + 1 << " did not ask";
    const std::vector<kernels::TokenLogprobs>& got = scores.by_id.at(id);
    ASSERT_EQ(got.size(), tokens.size() - 1) << "positions 1 to " << tokens.size() - 1;
    for (std::size_t i = 1; i < tokens.size(); ++i) {
      const std::vector<double> want = log_softmax(expected->data.data() + (i - 1) * vocab, vocab);
      const kernels::TokenLogprobs& t = got[i - 1];
      const std::string at = GetParam() + " prompt of " + std::to_string(tokens.size()) + ", position " + std::to_string(i);
      EXPECT_EQ(t.token, tokens[i]) << at;
      EXPECT_NEAR(t.logprob, want[static_cast<std::size_t>(tokens[i])], tol) << at;
      ASSERT_EQ(t.top.size(), static_cast<std::size_t>(k)) << at;
      std::vector<double> sorted = want;
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      for (std::size_t j = 0; j < t.top.size(); ++j) {
        EXPECT_NEAR(t.top[j].second, want[static_cast<std::size_t>(t.top[j].first)], tol) << at << ", alternative " << j;
        EXPECT_NEAR(t.top[j].second, sorted[j], tol) << at << ": alternative " << j << " is not the golden's";
      }
      const double own = want[static_cast<std::size_t>(tokens[i])];
      std::int32_t surely_above = 0, maybe_above = 0;
      for (double w : want) {
        surely_above += w > own + tol ? 1 : 0;
        maybe_above += w >= own - tol ? 1 : 0;
      }
      EXPECT_GE(t.rank, surely_above + 1) << at;
      EXPECT_LE(t.rank, maybe_above) << at;
    }
    id += 2;
  }
}

// A request asking for its prompt's log-probabilities takes no KV from the prefix cache (it
// must compute every position), so its numbers are those of a run without the cache, while
// a request that does not ask still shares the pages.
TEST_P(PromptLogprobsGolden, PrefixCachingChangesNothing) {
  const PromptScores plain = serve(2);
  const std::vector<std::int32_t> tokens = golden_["prompts"].back()["tokens"];
  DeploymentOptions o;
  o.policy.kind = PolicyKind::Async;
  o.kv_pages_per_rank = 256;
  o.page_size = 4;
  o.coordinator.prefix_caching = true;
  CpuDeployment d(weights_, Topology::colocated(weights_->config(), 1), o);
  PromptScores scores;
  d.observers().add(nullptr, &scores);
  // The first writes the prompt's pages; the others come once it has finished.
  const std::int64_t later = 1'000'000'000'000;
  d.submit({request(0, tokens, -1), request(1, tokens, 2, later), request(2, tokens, -1, later)});
  d.run();
  d.observers().remove(nullptr, &scores);
  const auto& records = d.coordinator().requests();
  ASSERT_EQ(records.size(), 3u);
  for (const RequestRecord& r : records) ASSERT_EQ(r.state, RequestState::Finished);
  EXPECT_EQ(records[1].cached_positions, 0) << "a request scoring its prompt computes every position";
  EXPECT_GT(records[2].cached_positions, 0) << "the cache was warm";
  const std::int64_t golden_id = 2 * (static_cast<std::int64_t>(golden_["prompts"].size()) - 1);
  const std::vector<kernels::TokenLogprobs>& want = plain.by_id.at(golden_id);
  const std::vector<kernels::TokenLogprobs>& got = scores.by_id.at(1);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, want[i].token);
    EXPECT_NEAR(got[i].logprob, want[i].logprob, 1e-5) << "position " << i + 1;
    EXPECT_EQ(got[i].rank, want[i].rank) << "position " << i + 1;
    ASSERT_EQ(got[i].top.size(), want[i].top.size());
    for (std::size_t j = 0; j < got[i].top.size(); ++j) EXPECT_EQ(got[i].top[j].first, want[i].top[j].first);
  }
  EXPECT_EQ(records[1].output, records[0].output);
}

INSTANTIATE_TEST_SUITE_P(F32Goldens, PromptLogprobsGolden,
                         ::testing::Values("mixtral-f32", "qwen2_moe-f32", "qwen3_moe-f32", "olmoe-f32"),
                         [](const auto& p) {
                           std::string name = p.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

struct Ended {
  void done(ExecutionTiming) { ++count; }
  int count = 0;
};

// The sample execution scores the rows it is given: a prompt whose rows come in chunks (a
// chunked prefill) gets, chunk by chunk, the numbers it gets whole. The coordinator cuts prompts
// under --max-num-batched-tokens (tests/serving/test_chunked_prefill.cpp); the executor's
// contract (Executor::sample) is per chunk, tested here on the final hidden rows directly
// (random ones: lm_head is all a sample execution applies).
TEST(PromptLogprobsChunks, AChunkedPromptScoresAsAWholeOne) {
  auto w = ModelWeights::load(kData / "mixtral-f32");
  ASSERT_TRUE(w.ok()) << w.status().message();
  const ModelConfig& c = (*w)->config();
  const std::int32_t length = 40;  // more than one pass of the executor's row slices
  std::mt19937 rng(11);
  std::vector<std::int32_t> prompt(length);
  for (auto& t : prompt) t = static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(c.vocab_size));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> hidden(static_cast<std::size_t>(length) * static_cast<std::size_t>(c.hidden_size));
  for (float& x : hidden) x = normal(rng);

  VirtualEventLoop loop;
  CpuExecutor executor(*w, CpuExecutorOptions{}, std::make_unique<VirtualStream>(loop));
  HostActivationOps ops;
  SequenceContext seq;
  seq.request = 7;
  seq.sampling.prompt_logprobs = 3;
  seq.prompt = prompt;
  // Scores rows [lo, hi) of the prompt as one sample execution.
  const auto score = [&](std::int32_t lo, std::int32_t hi) {
    TokenBatch batch;
    batch.columns = kAttentionColumns;
    for (std::int32_t p = lo; p < hi; ++p) batch.row.push_back({.request = 7, .position = p});
    batch.hidden = ops.allocate_from_host(hidden.data() + static_cast<std::size_t>(lo) * c.hidden_size, hi - lo,
                                          c.hidden_size);
    std::vector<std::int32_t> next;
    std::vector<kernels::TokenLogprobs> logprobs;
    std::vector<PromptLogprobs> out;
    Ended ended;
    executor.sample(batch, std::span<const SequenceContext>(&seq, 1), next, logprobs, out,
                    Completion::of<Ended, &Ended::done>(&ended));
    loop.run();
    EXPECT_EQ(ended.count, 1);
    EXPECT_EQ(next.size(), 1u) << "one token per request, chunk or not";
    EXPECT_TRUE(logprobs.empty()) << "the request did not ask for its sampled tokens'";
    return out;
  };
  const std::vector<PromptLogprobs> whole = score(0, length);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].request, 7);
  EXPECT_EQ(whole[0].first_position, 1);
  ASSERT_EQ(whole[0].tokens.size(), static_cast<std::size_t>(length - 1));

  std::vector<kernels::TokenLogprobs> joined;
  const std::vector<std::int32_t> cuts = {0, 1, 9, 33, length};
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const std::vector<PromptLogprobs> part = score(cuts[i], cuts[i + 1]);
    // The last chunk's last row scores nothing: it samples the first generated token.
    const std::int32_t scored = std::min(cuts[i + 1], length - 1) - cuts[i];
    if (scored == 0) {
      EXPECT_TRUE(part.empty());
      continue;
    }
    ASSERT_EQ(part.size(), 1u);
    EXPECT_EQ(part[0].first_position, cuts[i] + 1);
    ASSERT_EQ(part[0].tokens.size(), static_cast<std::size_t>(scored));
    joined.insert(joined.end(), part[0].tokens.begin(), part[0].tokens.end());
  }
  ASSERT_EQ(joined.size(), whole[0].tokens.size());
  for (std::size_t i = 0; i < joined.size(); ++i) {
    const kernels::TokenLogprobs& a = joined[i];
    const kernels::TokenLogprobs& b = whole[0].tokens[i];
    EXPECT_EQ(a.token, prompt[i + 1]);
    EXPECT_EQ(a.token, b.token);
    EXPECT_NEAR(a.logprob, b.logprob, 1e-5) << "position " << i + 1;
    EXPECT_EQ(a.rank, b.rank) << "position " << i + 1;
    ASSERT_EQ(a.top.size(), 3u);
    for (std::size_t j = 0; j < a.top.size(); ++j) EXPECT_EQ(a.top[j].first, b.top[j].first);
  }
}

}  // namespace
}  // namespace sy
