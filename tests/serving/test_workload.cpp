// Workload generation (AMoE length classes, Poisson arrivals, determinism) and the JSONL
// prompt/output files of `switchyard generate --prompts/--out`.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/serving/workload.h"

namespace sy {
namespace {

WorkloadSpec spec(LengthClass c, double rate, double duration, std::uint64_t seed) {
  return WorkloadSpec{c, rate, duration, seed, 1000};
}

TEST(Workload, LengthClassesHaveAmoeRanges) {
  const LengthRange s = length_range(LengthClass::Short);
  EXPECT_EQ((std::vector<int>{s.input_min, s.input_max, s.output_min, s.output_max}), (std::vector<int>{30, 70, 70, 130}));
  const LengthRange m = length_range(LengthClass::Medium);
  EXPECT_EQ((std::vector<int>{m.input_min, m.input_max, m.output_min, m.output_max}), (std::vector<int>{50, 150, 50, 250}));
  const LengthRange r = length_range(LengthClass::Reasonable);
  EXPECT_EQ((std::vector<int>{r.input_min, r.input_max, r.output_min, r.output_max}),
            (std::vector<int>{100, 300, 100, 500}));
}

TEST(Workload, ParseLengthClass) {
  EXPECT_EQ(parse_length_class("short").value(), LengthClass::Short);
  EXPECT_EQ(parse_length_class("medium").value(), LengthClass::Medium);
  EXPECT_EQ(parse_length_class("reasonable").value(), LengthClass::Reasonable);
  auto bad = parse_length_class("long");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "unknown length class 'long' (expected short, medium or reasonable)");
}

TEST(Workload, RequestsStayInsideTheClassRangesAndHitBothEnds) {
  for (LengthClass c : {LengthClass::Short, LengthClass::Medium, LengthClass::Reasonable}) {
    const auto reqs = generate_workload(spec(c, 200.0, 20.0, 7));
    const LengthRange r = length_range(c);
    ASSERT_GT(reqs.size(), 3000u);
    std::int32_t in_lo = 1 << 30, in_hi = 0, out_lo = 1 << 30, out_hi = 0;
    double in_sum = 0;
    for (const RequestSpec& q : reqs) {
      const auto n = static_cast<std::int32_t>(q.prompt.size());
      in_lo = std::min(in_lo, n);
      in_hi = std::max(in_hi, n);
      out_lo = std::min(out_lo, q.max_new_tokens);
      out_hi = std::max(out_hi, q.max_new_tokens);
      in_sum += n;
      for (std::int32_t t : q.prompt) ASSERT_TRUE(t >= 0 && t < 1000);
    }
    EXPECT_EQ(in_lo, r.input_min);
    EXPECT_EQ(in_hi, r.input_max);
    EXPECT_EQ(out_lo, r.output_min);
    EXPECT_EQ(out_hi, r.output_max);
    // Uniform: the mean input length is the midpoint, within 2% here.
    const double mid = (r.input_min + r.input_max) / 2.0;
    EXPECT_NEAR(in_sum / static_cast<double>(reqs.size()), mid, 0.02 * mid);
  }
}

TEST(Workload, PoissonArrivalsOverTheDuration) {
  const double rate = 100.0, duration = 100.0;
  const auto reqs = generate_workload(spec(LengthClass::Short, rate, duration, 42));
  // Expected 10000 arrivals, standard deviation 100: allow 4 sigma.
  EXPECT_NEAR(static_cast<double>(reqs.size()), rate * duration, 400.0);
  std::int64_t prev = 0;
  std::int64_t longer_than_mean = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(reqs[i].id, static_cast<std::int64_t>(i));
    EXPECT_EQ(reqs[i].external_id, std::to_string(i));
    ASSERT_GE(reqs[i].arrival_ns, prev);
    ASSERT_LT(reqs[i].arrival_ns, static_cast<std::int64_t>(duration * 1e9));
    if (reqs[i].arrival_ns - prev > static_cast<std::int64_t>(1e9 / rate)) ++longer_than_mean;
    prev = reqs[i].arrival_ns;
  }
  // Exponential gaps: P(gap > mean) = 1/e.
  EXPECT_NEAR(static_cast<double>(longer_than_mean) / static_cast<double>(reqs.size()), std::exp(-1.0), 0.02);
}

TEST(Workload, DeterministicPerSeed) {
  const auto a = generate_workload(spec(LengthClass::Medium, 50.0, 5.0, 123));
  const auto b = generate_workload(spec(LengthClass::Medium, 50.0, 5.0, 123));
  const auto c = generate_workload(spec(LengthClass::Medium, 50.0, 5.0, 124));
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_ns, b[i].arrival_ns);
    EXPECT_EQ(a[i].prompt, b[i].prompt);
    EXPECT_EQ(a[i].max_new_tokens, b[i].max_new_tokens);
  }
  ASSERT_FALSE(c.empty());
  EXPECT_NE(a[0].arrival_ns, c[0].arrival_ns);
}

// A shared prefix is put in front of what the seed draws, which stays as it was.
TEST(Workload, ASharedPrefixLeadsEveryPromptAndLeavesTheDrawsAlone) {
  WorkloadSpec with = spec(LengthClass::Short, 40.0, 2.0, 9);
  const auto plain = generate_workload(with);
  with.shared_prefix = 100;
  const auto prefixed = generate_workload(with);
  ASSERT_EQ(plain.size(), prefixed.size());
  ASSERT_FALSE(plain.empty());
  const std::vector<std::int32_t> prefix(prefixed[0].prompt.begin(), prefixed[0].prompt.begin() + 100);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(prefixed[i].arrival_ns, plain[i].arrival_ns);
    EXPECT_EQ(prefixed[i].max_new_tokens, plain[i].max_new_tokens);
    ASSERT_EQ(prefixed[i].prompt.size(), plain[i].prompt.size() + 100);
    EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), prefixed[i].prompt.begin()));
    EXPECT_TRUE(std::equal(plain[i].prompt.begin(), plain[i].prompt.end(), prefixed[i].prompt.begin() + 100));
  }
  // The same prefix for any seed.
  WorkloadSpec other = with;
  other.seed = 10;
  const auto o = generate_workload(other);
  ASSERT_FALSE(o.empty());
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), o[0].prompt.begin()));
  with.shared_prefix = -1;
  EXPECT_NE(validate_workload(with).message().find("shared prefix"), std::string::npos);
}

// The draw order and transforms are a contract (same seed, same workload, on every platform
// and version). These values were computed by an independent Python implementation of
// mt19937_64 and of the documented transforms (gap, input length, output length, tokens).
TEST(Workload, PinnedValuesForSeedFive) {
  const auto reqs = generate_workload(spec(LengthClass::Short, 10.0, 1.0, 5));
  ASSERT_EQ(reqs.size(), 9u);
  EXPECT_EQ(reqs[0].arrival_ns, 111799361);
  EXPECT_EQ(reqs[0].prompt.size(), 52u);
  EXPECT_EQ(reqs[0].max_new_tokens, 122);
  EXPECT_EQ(std::vector<std::int32_t>(reqs[0].prompt.begin(), reqs[0].prompt.begin() + 3),
            (std::vector<std::int32_t>{898, 844, 857}));
  EXPECT_EQ(reqs[3].arrival_ns, 427581174);
  EXPECT_EQ(reqs[3].max_new_tokens, 80);
  EXPECT_EQ(reqs[8].arrival_ns, 972100843);
  EXPECT_EQ(reqs[8].prompt.size(), 69u);
  EXPECT_EQ(reqs[8].max_new_tokens, 130);
  EXPECT_EQ(std::vector<std::int32_t>(reqs[8].prompt.begin(), reqs[8].prompt.begin() + 3),
            (std::vector<std::int32_t>{174, 55, 866}));
}

TEST(Workload, InvalidSpecsAreNamedAndGenerateNothing) {
  EXPECT_TRUE(generate_workload(spec(LengthClass::Short, 10.0, 0.0, 1)).empty());
  EXPECT_TRUE(validate_workload(spec(LengthClass::Short, 10.0, 0.0, 1)).ok());
  WorkloadSpec s = spec(LengthClass::Short, 0.0, 1.0, 1);
  EXPECT_NE(validate_workload(s).message().find("workload rate must be a positive number"), std::string::npos);
  EXPECT_TRUE(generate_workload(s).empty());
  s = spec(LengthClass::Short, 1.0, -1.0, 1);
  EXPECT_NE(validate_workload(s).message().find("workload duration must be >= 0"), std::string::npos);
  s = spec(LengthClass::Short, 1.0, 1.0, 1);
  s.vocab_size = 0;
  EXPECT_EQ(validate_workload(s).message(), "workload vocab_size must be > 0, got 0");
  EXPECT_TRUE(generate_workload(s).empty());
  s = spec(LengthClass::Short, 1e6, 1e3, 1);
  EXPECT_NE(validate_workload(s).message().find("more than the 1e7"), std::string::npos);
}

// ---- JSONL files ---------------------------------------------------------------------------

class JsonlFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sy_jsonl_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path write(const std::string& text, const std::string& name = "in.jsonl") {
    const auto p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  std::string read(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // The message of the refusal of `text`, which must start with "<file>:<line>: ".
  std::string refusal(const std::string& text, std::int64_t line) {
    const auto p = write(text);
    auto r = read_prompts_jsonl(p, 100);
    EXPECT_FALSE(r.ok()) << text;
    if (r.ok()) return "";
    const std::string prefix = p.string() + ":" + std::to_string(line) + ": ";
    const std::string& m = r.status().message();
    EXPECT_EQ(m.rfind(prefix, 0), 0u) << m;
    return m.substr(std::min(m.size(), prefix.size()));
  }

  std::filesystem::path dir_;
};

TEST_F(JsonlFiles, ReadsIntegerAndStringIdsAndSkipsBlankLines) {
  const auto p = write(
      "{\"id\": 7, \"tokens\": [1, 2, 3], \"max_new_tokens\": 4}\r\n"
      "\n"
      "   \n"
      "{\"id\": \"req-b\", \"tokens\": [99], \"max_new_tokens\": 0, \"text\": \"ignored\"}\n"
      "{\"id\": \"7\", \"tokens\": [0], \"max_new_tokens\": 1}");
  auto r = read_prompts_jsonl(p, 100);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].id, 0);
  EXPECT_EQ((*r)[0].external_id, "7");
  EXPECT_EQ((*r)[0].prompt, (std::vector<std::int32_t>{1, 2, 3}));
  EXPECT_EQ((*r)[0].max_new_tokens, 4);
  EXPECT_EQ((*r)[0].arrival_ns, 0);
  EXPECT_EQ((*r)[1].id, 1);
  EXPECT_EQ((*r)[1].external_id, "\"req-b\"");
  EXPECT_EQ((*r)[1].prompt, (std::vector<std::int32_t>{99}));
  EXPECT_EQ((*r)[1].max_new_tokens, 0);
  EXPECT_EQ((*r)[2].external_id, "\"7\"");  // the string "7" is not the integer 7
}

TEST_F(JsonlFiles, RefusalsNameFileLineAndProblem) {
  const std::string ok = "{\"id\": 1, \"tokens\": [1], \"max_new_tokens\": 2}\n";
  EXPECT_NE(refusal(ok + "{\"id\": 2, \"tokens\": [1,}\n", 2).find("bad JSON: parse error at column 24: syntax error"), std::string::npos);
  EXPECT_EQ(refusal("[1, 2]\n", 1), "expected a JSON object {\"id\", \"tokens\", \"max_new_tokens\"}");
  EXPECT_EQ(refusal(ok + "\n{\"tokens\": [1], \"max_new_tokens\": 2}\n", 3), "missing field 'id'");
  EXPECT_EQ(refusal("{\"id\": 1, \"max_new_tokens\": 2}\n", 1), "missing field 'tokens'");
  EXPECT_EQ(refusal("{\"id\": 1, \"tokens\": [1]}\n", 1), "missing field 'max_new_tokens'");
  EXPECT_EQ(refusal("{\"id\": 1.5, \"tokens\": [1], \"max_new_tokens\": 2}\n", 1),
            "id must be an integer or a string, got 1.5");
  EXPECT_EQ(refusal("{\"id\": null, \"tokens\": [1], \"max_new_tokens\": 2}\n", 1),
            "id must be an integer or a string, got null");
  EXPECT_EQ(refusal("{\"id\": 1, \"tokens\": \"hello\", \"max_new_tokens\": 2}\n", 1),
            "tokens must be an array of token ids, got \"hello\"");
  EXPECT_EQ(refusal("{\"id\": 1, \"tokens\": [], \"max_new_tokens\": 2}\n", 1),
            "tokens is empty (a prompt needs at least one token)");
  EXPECT_EQ(refusal("{\"id\": 1, \"tokens\": [5, 100], \"max_new_tokens\": 2}\n", 1),
            "token 100 at position 1 is outside the vocabulary [0, 100)");
  EXPECT_EQ(refusal("{\"id\": 1, \"tokens\": [-1], \"max_new_tokens\": 2}\n", 1),
            "token -1 at position 0 is outside the vocabulary [0, 100)");
  EXPECT_EQ(refusal("{\"id\": 1, \"tokens\": [2.0], \"max_new_tokens\": 2}\n", 1),
            "token 2.0 at position 0 is outside the vocabulary [0, 100)");
  EXPECT_EQ(refusal("{\"id\": 1, \"tokens\": [2], \"max_new_tokens\": -3}\n", 1),
            "max_new_tokens must be an integer in [0, 2147483647], got -3");
  EXPECT_EQ(refusal(ok + ok, 2), "duplicate id 1 (first on line 1)");
  EXPECT_EQ(refusal("{\"id\": \"a\", \"tokens\": [1], \"max_new_tokens\": 2}\n" + ok +
                        "{\"id\": \"a\", \"tokens\": [1], \"max_new_tokens\": 2}\n",
                    3),
            "duplicate id \"a\" (first on line 1)");
}

TEST_F(JsonlFiles, MissingFileIsNamed) {
  auto r = read_prompts_jsonl(dir_ / "absent.jsonl", 100);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("cannot open prompts file " + (dir_ / "absent.jsonl").string(), 0), 0u);
}

TEST_F(JsonlFiles, OutputsKeepIdTypesAndReplaceTheFileAtomically) {
  const auto out = dir_ / "out.jsonl";
  write("old contents that must disappear\n", "out.jsonl");
  ASSERT_TRUE(write_outputs_jsonl(out, {{"7", {1, 2}}, {"\"req-b\"", {}}, {"\"7\"", {5}}, {"not json", {3}}}).ok());
  EXPECT_EQ(read(out),
            "{\"id\":7,\"output\":[1,2]}\n"
            "{\"id\":\"req-b\",\"output\":[]}\n"
            "{\"id\":\"7\",\"output\":[5]}\n"
            "{\"id\":\"not json\",\"output\":[3]}\n");
  // Only the output is left: no temporary file beside it.
  std::int64_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) files += e.path() != out;
  EXPECT_EQ(files, 0);
}

TEST_F(JsonlFiles, PromptIdsRoundTripToOutputs) {
  const auto in = write(
      "{\"id\": 12345678901, \"tokens\": [1], \"max_new_tokens\": 1}\n"
      "{\"id\": \"x\\\"y\", \"tokens\": [2], \"max_new_tokens\": 1}\n");
  auto reqs = read_prompts_jsonl(in, 100);
  ASSERT_TRUE(reqs.ok()) << reqs.status().message();
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> outputs;
  for (const RequestSpec& r : *reqs) outputs.push_back({r.external_id, {r.prompt[0] + 10}});
  ASSERT_TRUE(write_outputs_jsonl(dir_ / "out.jsonl", outputs).ok());
  EXPECT_EQ(read(dir_ / "out.jsonl"),
            "{\"id\":12345678901,\"output\":[11]}\n"
            "{\"id\":\"x\\\"y\",\"output\":[12]}\n");
}

TEST_F(JsonlFiles, UnwritableOutputIsNamedAndLeavesNothing) {
  const auto out = dir_ / "no-such-dir" / "out.jsonl";
  Status s = write_outputs_jsonl(out, {{"1", {1}}});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("cannot write " + out.string() + ": ", 0), 0u) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir_ / "no-such-dir"));
}

}  // namespace
}  // namespace sy
