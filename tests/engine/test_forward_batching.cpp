// A batch that mixes sequences and phases gives each sequence the logits it gets alone: the
// property the batched runtime relies on.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "engine/forward/forward_pass.h"
#include "engine/kv/kv_block_allocator.h"
#include "engine/kv/sequence_kv.h"
#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"

namespace sy {
namespace {

class ForwardBatching : public ::testing::TestWithParam<Arch> {};

TEST_P(ForwardBatching, MixedBatchEqualsSeparateSessions) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("sy_test_batching_" + arch_name(GetParam()) + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(write_random_model(preset_config(GetParam(), ModelPreset::Tiny, kernels::DType::F32), 7, dir).ok());
  auto weights = ModelWeights::load(dir);
  ASSERT_TRUE(weights.ok()) << weights.status().message();
  const std::int32_t V = (*weights)->config().vocab_size;

  std::mt19937 rng(1);
  std::uniform_int_distribution<std::int32_t> tok(0, V - 1);
  auto random_tokens = [&](int n) {
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    for (auto& x : t) x = tok(rng);
    return t;
  };
  // Sequence A: 9-token history then 1 decode token; B: fresh 6-token prefill; C: 3 + 2 tokens.
  const auto a_hist = random_tokens(9), a_new = random_tokens(1);
  const auto b_new = random_tokens(6);
  const auto c_hist = random_tokens(3), c_new = random_tokens(2);

  auto alone = [&](const std::vector<std::int32_t>& hist, const std::vector<std::int32_t>& fresh) {
    ReferenceSession s(*weights, 16);
    if (!hist.empty()) {
      EXPECT_TRUE(s.forward(hist, false).ok());
    }
    return *s.forward(fresh, true);
  };
  const auto a_ref = alone(a_hist, a_new), b_ref = alone({}, b_new), c_ref = alone(c_hist, c_new);

  ModelOps ops(*weights);
  PagedKvCache cache((*weights)->config(), 32, 4);
  Workspace ws;
  std::vector<float> hidden;
  KvBlockAllocator pages(cache.num_pages(), cache.page_size());
  SequenceKv a, c, b;  // allocation order interleaves the pages of different sequences
  ASSERT_TRUE(a.reserve(pages, 10) && c.reserve(pages, 5) && b.reserve(pages, 6));
  for (auto [kv, hist] : {std::pair{&a, &a_hist}, std::pair{&c, &c_hist}}) {
    BatchLayout h;
    h.add_sequence(static_cast<std::int32_t>(hist->size()), 0, kv->block_table());
    forward_pass(ops, h, cache, hist->data(), {}, nullptr, ws, hidden);
    kv->length = static_cast<std::int32_t>(hist->size());
  }
  BatchLayout batch;
  std::vector<std::int32_t> tokens;
  batch.add_sequence(1, a.length, a.block_table());
  tokens.insert(tokens.end(), a_new.begin(), a_new.end());
  batch.add_sequence(6, 0, b.block_table());
  tokens.insert(tokens.end(), b_new.begin(), b_new.end());
  batch.add_sequence(2, c.length, c.block_table());
  tokens.insert(tokens.end(), c_new.begin(), c_new.end());
  std::vector<std::int32_t> rows(tokens.size());
  for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<std::int32_t>(i);
  std::vector<float> logits(tokens.size() * static_cast<std::size_t>(V));
  forward_pass(ops, batch, cache, tokens.data(), rows, logits.data(), ws, hidden);

  std::vector<float> expected;
  for (const auto* r : {&a_ref, &b_ref, &c_ref}) expected.insert(expected.end(), r->begin(), r->end());
  ASSERT_EQ(expected.size(), logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i)
    ASSERT_NEAR(logits[i], expected[i], 1e-4 * (1 + std::fabs(expected[i]))) << "row " << i / V;
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Archs, ForwardBatching, ::testing::Values(Arch::Mixtral, Arch::Qwen2Moe, Arch::Qwen3Moe, Arch::Olmoe),
                         [](const auto& p) { return arch_name(p.param); });

}  // namespace
}  // namespace sy
