// The token mask: the fast trie walk gives exactly the naive reference's set (every token fed
// byte by byte to a copy of the matcher), at every step of matching texts, on the tiny model's
// tokenizer family (llama: Metaspace-style with byte fallback) and qwen2's (byte-level BPE).
// Also prints the mask's cost per step (not asserted), with a ~150k-token synthetic vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "engine/structured/guide.h"
#include "engine/structured/model_vocabulary.h"
#include "engine/structured/schema_compiler.h"
#include "engine/structured/token_mask.h"
#include "tests/structured/fixtures.h"
#include "tests/structured/synthetic_vocabulary.h"

namespace sy::structured {
namespace {

const char* kSchema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},
  "tags":{"type":"array","items":{"enum":["a","bb",3]},"maxItems":3},"n":{"type":"number"},"ok":{"type":["boolean","null"]}},
  "required":["name","n"],"additionalProperties":false})";

// Feeds `text` byte by byte and compares the masks at every byte boundary.
void compare_along(const std::shared_ptr<const Grammar>& g, const TokenVocabulary& v, const std::string& text) {
  Matcher m(g);
  std::vector<std::uint32_t> fast, naive;
  const std::size_t words = (static_cast<std::size_t>(v.size()) + 31) / 32;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    compute_token_mask(m, v, words, fast);
    naive_token_mask(m, v, words, naive);
    ASSERT_EQ(fast, naive) << "after " << text.substr(0, i);
    std::size_t allowed = 0;
    for (std::uint32_t w : fast) allowed += static_cast<std::size_t>(__builtin_popcount(w));
    EXPECT_GT(allowed, 0u) << "after " << text.substr(0, i);
    if (i < text.size()) {
      ASSERT_TRUE(m.feed(static_cast<std::uint8_t>(text[i]))) << text.substr(0, i + 1);
    }
  }
}

class TokenMaskTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenMaskTest, FastEqualsNaive) {
  const auto v = load(GetParam());
  compare_along(schema(kSchema), *v, R"( {"name": "ab\u00e9 c", "tags": ["bb", 3], "n": -1.5e2, "ok": null} )");
  compare_along(Grammar::any_object(), *v, "{\"a\": [1, {\"b\": \"\xc3\xa9\"}, true], \"c\": \"x\"}");
  compare_along(Grammar::choice({"positive", "negative", "neutral"}), *v, "neutral");
}

TEST_P(TokenMaskTest, EndTokensOnlyWhereTheOutputMayEnd) {
  const auto v = load(GetParam());
  const std::int32_t eos = v->end_tokens()[0];
  Guide guide({Grammar::choice({"yes", "no"}), v});
  EXPECT_FALSE(mask_allows(guide.mask(), eos));
  // Spell "no" with the tokenizer's own tokens: some token whose bytes are "n", then "o".
  for (const char c : std::string("no")) {
    std::int32_t id = -1;
    for (std::int32_t t = 0; t < v->size() && id < 0; ++t)
      if (v->bytes(t) == std::string(1, c)) id = t;
    ASSERT_GE(id, 0);
    ASSERT_TRUE(mask_allows(guide.mask(), id));
    guide.advance(id);
  }
  // Complete: only the end token.
  std::size_t allowed = 0;
  for (std::int32_t t = 0; t < v->size(); ++t) allowed += mask_allows(guide.mask(), t) ? 1 : 0;
  EXPECT_EQ(allowed, 1u);
  EXPECT_TRUE(mask_allows(guide.mask(), eos));
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, TokenMaskTest, ::testing::Values("llama", "qwen2"));

// A vocabulary of about 150k byte strings shaped like a byte-level BPE's (every byte, then words
// and pieces with and without a leading space, punctuation runs, digits): the repo holds no real
// 150k tokenizer. Prints the mask's cost per step at a few matcher states.
TEST(TokenMaskCost, PrintsPerStepCost) {
  const TokenVocabulary big = synthetic_vocabulary();
  const auto llama = load("llama");
  const auto g = schema(kSchema);
  const char* prefixes[] = {"", "{\"name\": \"ab", "{\"name\": \"ab\", \"n\": 12", "{\"name\": \"ab\", \"tags\": [",
                            "json_object key"};
  for (const TokenVocabulary* v : {llama.get(), &big}) {
    for (const char* p : prefixes) {
      Matcher m(g);
      if (std::string(p) == "json_object key") m = Matcher(Grammar::any_object());
      ASSERT_TRUE(m.feed(std::string(p) == "json_object key" ? std::string("{\"ke") : std::string(p)));
      std::vector<std::uint32_t> mask;
      const std::size_t words = (static_cast<std::size_t>(v->size()) + 31) / 32;
      const int reps = v->size() > 10000 ? 5 : 200;
      const auto t0 = std::chrono::steady_clock::now();
      for (int k = 0; k < reps; ++k) compute_token_mask(m, *v, words, mask);
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
      std::size_t allowed = 0;
      for (std::uint32_t w : mask) allowed += static_cast<std::size_t>(__builtin_popcount(w));
      std::printf("[mask cost] vocab %d, after '%s': %.3f ms per step, %zu tokens allowed\n", v->size(), p, ms, allowed);
    }
  }
}

}  // namespace
}  // namespace sy::structured
