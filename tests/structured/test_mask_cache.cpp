// Masks by matcher state (mask_cache.h) and guide specs shared by equal grammars (guide_specs.h):
// a cached mask is exactly the mask computed for the matcher at hand, at every byte of real
// outputs on both tokenizer families; the matcher's saturated counters make equal states equal
// and keep unequal ones apart; the cache keeps to its bytes. Also prints what a guided output
// costs per token with and without the cache (not asserted), on a ~150k-token vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "engine/structured/guide.h"
#include "engine/structured/guide_specs.h"
#include "engine/structured/mask_cache.h"
#include "engine/structured/model_vocabulary.h"
#include "engine/structured/schema_compiler.h"
#include "engine/structured/token_mask.h"
#include "tests/structured/fixtures.h"
#include "tests/structured/synthetic_vocabulary.h"

namespace sy::structured {
namespace {

// Unbounded strings, an array of them, a bounded string and a bounded array.
const char* kReport = R"({"type":"object","properties":{"title":{"type":"string"},"summary":{"type":"string"},
  "code":{"type":"string","minLength":2,"maxLength":4},"score":{"type":"number"},
  "tags":{"type":"array","items":{"type":"string"},"maxItems":5}},
  "required":["title","summary","code","score","tags"],"additionalProperties":false})";
const char* kReportText =
    R"({"title": "the quick brown fox", "summary": "jumps over the lazy dog, again \"and\" again", )"
    R"("code": "ab1", "score": 0.75, "tags": ["alpha", "beta", "gamma", "delta"]})";

std::size_t words_of(const TokenVocabulary& v) { return (static_cast<std::size_t>(v.size()) + 31) / 32; }

// Feeds `text` byte by byte; at every boundary the cache's mask must be the one computed for
// this very matcher.
void compare_along(MaskCache& cache, const std::shared_ptr<const Grammar>& g, const TokenVocabulary& v,
                   const std::string& text) {
  Matcher m(g);
  const std::size_t words = words_of(v);
  std::vector<std::uint32_t> computed;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    compute_token_mask(m, v, words, computed);
    ASSERT_EQ(*cache.mask(m, v, words), computed) << "after " << text.substr(0, i);
    if (i < text.size()) {
      ASSERT_TRUE(m.feed(static_cast<std::uint8_t>(text[i]))) << text.substr(0, i + 1);
    }
  }
}

class MaskCacheTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MaskCacheTest, GivesTheMaskComputedForTheMatcherAtHand) {
  const auto v = load(GetParam());
  MaskCache cache;
  const auto report = schema(kReport);
  compare_along(cache, report, *v, kReportText);
  const MaskCache::Stats first = cache.stats();
  // Inside each unbounded string every position is one state: the title's 19 characters, the
  // summary's 40 or so outside its escapes and the tags' items find their state cached (a key's
  // positions are states of their own while a named property still matches it).
  EXPECT_GE(first.hits, 70) << first.misses << " states for " << std::string(kReportText).size() << " bytes";
  // The same output again: every mask from the cache.
  compare_along(cache, report, *v, kReportText);
  EXPECT_EQ(cache.stats().misses, first.misses);
  MaskCache any;
  compare_along(any, Grammar::any_object(), *v, "{\"a\": [1, {\"bcd\": \"\xc3\xa9\"}, true], \"cc\": \"x\\u00e9y\"}");
  compare_along(any, Grammar::choice({"positive", "negative", "neutral"}), *v, "neutral");
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, MaskCacheTest, ::testing::Values("llama", "qwen2"));

// The matcher after `prefix` of a report.
Matcher after(const std::shared_ptr<const Grammar>& g, const std::string& prefix) {
  Matcher m(g);
  EXPECT_TRUE(m.feed(prefix)) << prefix;
  return m;
}

TEST(MatcherState, CountersSaturateWhereTheBoundsStopLooking) {
  const auto g = schema(kReport);
  auto same = [&g](const std::string& a, const std::string& b) {
    const Matcher x = after(g, a), y = after(g, b);
    if (x.same_state(y)) {
      EXPECT_EQ(x.state_hash(), y.state_hash()) << a << " | " << b;
    }
    return x.same_state(y);
  };
  // An unbounded string: one state at every position (and after an escape or a \u escape).
  EXPECT_TRUE(same(R"({"title": "a)", R"({"title": "abc)"));
  EXPECT_TRUE(same(R"({"title": "a)", R"({"title": "a\"b)"));
  EXPECT_TRUE(same(R"({"title": "a)", R"({"title": "\u00e9)"));
  EXPECT_FALSE(same(R"({"title": "a)", R"({"title": "a\)"));  // inside the escape
  // minLength 2, maxLength 4: every count up to 4 matters.
  const std::string code = R"({"title": "", "summary": "", "code": ")";
  EXPECT_FALSE(same(code + "a", code + "ab"));
  EXPECT_FALSE(same(code + "ab", code + "abc"));
  // A different property is a different state.
  EXPECT_FALSE(same(R"({"title": "a)", R"({"title": "", "summary": "a)"));
  // maxItems 5: the items' count matters; a closed array's does not exist any more.
  const std::string tags = code + R"(ab", "score": 1, "tags": [")";
  EXPECT_FALSE(same(tags + "a", tags + R"(a", "b)"));
  EXPECT_TRUE(same(tags + "a", tags + "abc"));
  // json_object: past every named property (there are none) a key's length is not state.
  const auto object = Grammar::any_object();
  EXPECT_TRUE(after(object, R"({"k)").same_state(after(object, R"({"key)")));
  // An unbounded array of an unbounded string's items: every item is the same state.
  const auto list = schema(R"({"type":"array","items":{"type":"string"}})");
  EXPECT_TRUE(after(list, R"([")").same_state(after(list, R"(["a", "b", ")")));
  // Matchers of different grammars never share a state.
  EXPECT_FALSE(after(list, R"([")").same_state(after(schema(R"({"type":"array","items":{"type":"string"}})"), R"([")")));
}

TEST(MaskCache, KeepsToItsBytesDroppingTheLeastRecentlyUsed) {
  const auto v = load("llama");
  const std::size_t words = words_of(*v);
  const std::size_t one = words * sizeof(std::uint32_t);
  MaskCache cache(2 * one);
  const auto g = schema(kReport);
  const Matcher a = after(g, "{"), b = after(g, R"({"title")"), c = after(g, R"({"title": ")");
  const auto mask_a = cache.mask(a, *v, words);
  cache.mask(b, *v, words);
  EXPECT_EQ(cache.mask(a, *v, words), mask_a);  // a hit, and now the most recent
  cache.mask(c, *v, words);                     // drops b
  MaskCache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, 2 * one);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 3);
  EXPECT_EQ(cache.mask(a, *v, words), mask_a);
  cache.mask(b, *v, words);
  EXPECT_EQ(cache.stats().misses, 4);  // b was gone
  // Below one mask's size it still keeps one.
  MaskCache tiny(1);
  tiny.mask(a, *v, words);
  tiny.mask(b, *v, words);
  EXPECT_EQ(tiny.stats().entries, 1u);
}

TEST(GuideSpecs, EqualGrammarsShareOneSpecAndItsMasks) {
  const auto v = load("qwen2");
  GuideSpecs specs(v, 2);
  const auto first = specs.get(schema(kReport));
  ASSERT_TRUE(first->masks);
  EXPECT_EQ(first->vocabulary, v);
  // The same schema compiled again (each request compiles its own): the same spec.
  EXPECT_EQ(specs.get(schema(kReport)), first);
  const auto other = specs.get(Grammar::any_object());
  EXPECT_NE(other, first);
  EXPECT_EQ(specs.size(), 2u);
  // A guide of one request fills the cache another request then reads.
  Guide one(*first);
  const std::int64_t misses = first->masks->stats().misses;
  Guide two(*specs.get(schema(kReport)));
  EXPECT_EQ(first->masks->stats().misses, misses);
  EXPECT_EQ(std::vector<std::uint32_t>(one.mask().begin(), one.mask().end()),
            std::vector<std::uint32_t>(two.mask().begin(), two.mask().end()));
  // Two grammars at most: a third drops the least recently asked for (the report, now).
  specs.get(Grammar::any_object());
  specs.get(Grammar::choice({"x", "y"}));
  EXPECT_EQ(specs.size(), 2u);
  EXPECT_NE(specs.get(schema(kReport)), first);
}

// Token ids spelling `text` on `v`, each the longest the guide allows next (a model's output
// would be one such spelling).
std::vector<std::int32_t> spell(const TokenVocabulary& v, const GuideSpec& spec, const std::string& text) {
  std::unordered_map<std::string, std::int32_t> ids;
  std::size_t longest = 0;
  for (std::int32_t t = 0; t < v.size(); ++t) {
    if (v.bytes(t).empty()) continue;
    ids.emplace(v.bytes(t), t);
    longest = std::max(longest, v.bytes(t).size());
  }
  Guide guide(spec);
  std::vector<std::int32_t> out;
  for (std::size_t at = 0; at < text.size();) {
    std::int32_t pick = -1;
    std::size_t len = std::min(longest, text.size() - at);
    for (; len > 0 && pick < 0; --len) {
      auto it = ids.find(text.substr(at, len));
      if (it != ids.end() && mask_allows(guide.mask(), it->second)) pick = it->second;
    }
    EXPECT_GE(pick, 0) << "no allowed token at " << text.substr(at);
    if (pick < 0) break;
    out.push_back(pick);
    at += v.bytes(pick).size();
    guide.advance(pick);
  }
  return out;
}

TEST(MaskCacheCost, PrintsAGuidedOutputsCostPerToken) {
  const auto big = std::make_shared<const TokenVocabulary>(synthetic_vocabulary());
  const GuideSpec uncached{schema(kReport), big};
  const std::vector<std::int32_t> tokens = spell(*big, uncached, kReportText);
  ASSERT_FALSE(tokens.empty());
  auto run = [&tokens](const GuideSpec& spec) {
    const auto t0 = std::chrono::steady_clock::now();
    Guide guide(spec);
    for (const std::int32_t t : tokens) guide.advance(t);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
           static_cast<double>(tokens.size() + 1);
  };
  GuideSpecs specs(big);
  const auto cached = specs.get(schema(kReport));
  const double none = run(uncached), cold = run(*cached), warm = run(*cached);
  const MaskCache::Stats s = cached->masks->stats();
  std::printf("[mask cache] vocab %d, %zu tokens of a report: %.3f ms per token without the cache, %.3f the first "
              "request (%lld states), %.4f the next (%.0fx); %zu masks, %.1f MiB\n",
              big->size(), tokens.size(), none, cold, static_cast<long long>(s.misses), warm, none / warm, s.entries,
              static_cast<double>(s.bytes) / (1 << 20));
}

}  // namespace
}  // namespace sy::structured
