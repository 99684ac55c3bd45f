// RoPE variants of config.json: each golden config (tests/golden/data/rope, written from
// transformers' own rotary module by tools/goldens) parsed and turned into the same float32
// inverse frequencies (within 2 ulps) and cos/sin factor; and what is refused, with its message.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/model/model_config.h"
#include "engine/model/rope_scaling.h"
#include "tests/model/model_test_util.h"

namespace sy {
namespace {

using nlohmann::json;
using testing_util::FailsWith;

const std::string kSrc = "/models/m/config.json";

json golden_cases() {
  std::ifstream in(std::filesystem::path(SY_SOURCE_DIR) / "tests/golden/data/rope/frequencies.json");
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());
}

StatusOr<ModelConfig> parse(const json& j) { return ModelConfig::from_json(j.dump(), kSrc); }

TEST(RopeScaling, FrequenciesMatchTransformers) {
  const json golden = golden_cases();
  ASSERT_GE(golden.at("cases").size(), 10u);
  for (const json& c : golden.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto config = parse(c.at("config"));
    ASSERT_TRUE(config.ok()) << config.status().message();
    const kernels::Rope rope = config->rope();
    const auto& expected = c.at("inv_freq");
    ASSERT_EQ(rope.inv_freq().size(), expected.size());
    // torch evaluates `base ** exponents` with its vectorised pow (SLEEF, within 1 ulp), glibc's
    // powf rounds correctly: the two differ by an ulp at a few frequencies, and the steps after
    // carry that ulp along. Everything else about each type (which frequencies are scaled, by how
    // much, the ramp) shows as far more than 2 ulps.
    std::int64_t worst = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const auto want = static_cast<float>(expected[i].get<double>());
      const std::int64_t ulps = std::abs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(rope.inv_freq()[i])) -
                                         static_cast<std::int64_t>(std::bit_cast<std::int32_t>(want)));
      EXPECT_LE(ulps, 2) << "inv_freq[" << i << "] " << rope.inv_freq()[i] << " != " << want;
      worst = std::max(worst, ulps);
    }
    std::printf("%-72s worst %lld ulp\n", c.at("name").get<std::string>().c_str(), static_cast<long long>(worst));
    EXPECT_EQ(rope.attention_scaling(), static_cast<float>(c.at("attention_scaling").get<double>()));
  }
}

TEST(RopeScaling, ConfigRoundTripsThroughToJson) {
  // Held: a range over golden_cases().at(...) would outlive the temporary it points into
  // (AddressSanitizer's heap-use-after-free in the debug preset).
  const json golden = golden_cases();
  for (const json& c : golden.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const auto a = parse(c.at("config"));
    ASSERT_TRUE(a.ok()) << a.status().message();
    const auto b = ModelConfig::from_json(a->to_json(), "round trip");
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(a->rope_scaling, b->rope_scaling);
    EXPECT_EQ(a->rope_theta, b->rope_theta);
    EXPECT_EQ(a->rope().inv_freq(), b->rope().inv_freq());
  }
}

json qwen3_json() {
  return golden_cases().at("cases").at(0).at("config");
}

TEST(RopeScaling, ReadsEachTypesKeysWithTransformersDefaults) {
  json j = qwen3_json();
  j["max_position_embeddings"] = 131072;
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e6}, {"factor", 4.0}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope_scaling.type, RopeType::Yarn);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 131072);  // max_position_embeddings
  EXPECT_EQ(c->rope_scaling.beta_fast, 32);
  EXPECT_EQ(c->rope_scaling.beta_slow, 1);
  EXPECT_TRUE(c->rope_scaling.truncate);
  EXPECT_FALSE(c->rope_scaling.attention_factor.has_value());
  EXPECT_NEAR(c->rope().attention_scaling(), 0.1 * std::log(4.0) + 1, 1e-7);

  // A non-empty rope_scaling replaces rope_parameters (transformers' convert_rope_params_to_dict).
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope_scaling.type, RopeType::Linear);
  EXPECT_EQ(c->rope_theta, 1e6);  // the top-level rope_theta of the case
  // An empty one does not.
  j["rope_scaling"] = json::object();
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope_scaling.type, RopeType::Yarn);

  // beta 0 falls back as `get(...) or 32` does.
  j.erase("rope_scaling");
  j["rope_parameters"]["beta_fast"] = 0;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->rope_scaling.beta_fast, 32);
}

TEST(RopeScaling, RefusesWhatItCannotRunWithTheReason) {
  json j = qwen3_json();
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  EXPECT_TRUE(FailsWith(parse(j), {"rope_scaling", "'dynamic'", "length of the batch", "supported: default, linear, yarn, llama3", kSrc}));
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"short_factor", {1.0}}, {"long_factor", {2.0}}};
  EXPECT_TRUE(FailsWith(parse(j), {"'longrope'", "length of the batch", kSrc}));
  j["rope_scaling"] = {{"rope_type", "ntk-by-parts"}};
  EXPECT_TRUE(FailsWith(parse(j), {"'ntk-by-parts'", "not a RoPE variant this engine knows", kSrc}));
  j["rope_scaling"] = {{"type", "default"}, {"factor", 4.0}};
  EXPECT_TRUE(FailsWith(parse(j), {"rope_scaling", "sets 'factor'", "'default' does not use", kSrc}));
  j["rope_scaling"] = {{"rope_type", "linear"}};
  EXPECT_TRUE(FailsWith(parse(j), {"missing required key 'factor'", "rope_scaling of " + kSrc}));
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", -2.0}};
  EXPECT_TRUE(FailsWith(parse(j), {"'factor'", "positive", kSrc}));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"beta_fast", 32}, {"mscale", "big"}};
  EXPECT_TRUE(FailsWith(parse(j), {"'mscale'", "number", kSrc}));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"truncate", 1}};
  EXPECT_TRUE(FailsWith(parse(j), {"'truncate'", "true or false", kSrc}));
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
  EXPECT_TRUE(FailsWith(parse(j), {"missing required key 'high_freq_factor'", kSrc}));
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 4.0}};
  EXPECT_TRUE(FailsWith(parse(j), {"'high_freq_factor'", "greater than low_freq_factor", kSrc}));
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"partial_rotary_factor", 0.5}};
  EXPECT_TRUE(FailsWith(parse(j), {"'partial_rotary_factor'", "must be 1", kSrc}));
  j["rope_scaling"] = "yarn";
  EXPECT_TRUE(FailsWith(parse(j), {"rope_scaling", "object or null", kSrc}));
}

}  // namespace
}  // namespace sy
