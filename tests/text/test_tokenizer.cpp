// Tokenizer behaviour beyond the goldens: errors for what we do not support, tokenizer_config
// handling, thread safety.
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <thread>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include "engine/text/tokenizer.h"

namespace sy::text {
namespace {

const std::filesystem::path kRoot = SY_SOURCE_DIR;

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json asset(const std::string& style) {
  return nlohmann::json::parse(slurp(kRoot / "assets" / "tokenizers" / style / "tokenizer.json"));
}

std::string error_of(const nlohmann::json& j, const std::string& config = "") {
  auto t = Tokenizer::from_json(j.dump(), config, "/m/tokenizer.json");
  return t.ok() ? "" : t.status().message();
}

TEST(Tokenizer, UnsupportedComponentsAreNamedWithTheFile) {
  auto j = asset("qwen2");
  j["normalizer"] = {{"type", "BertNormalizer"}};
  EXPECT_EQ(error_of(j), "/m/tokenizer.json: normalizer type 'BertNormalizer': not supported (supported: NFC, NFD, "
                         "NFKC, NFKD, Lowercase, Strip, Prepend, Replace, Sequence)");
  j = asset("qwen2");
  j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Punctuation"}};
  EXPECT_NE(error_of(j).find("pre_tokenizer type 'Punctuation': not supported"), std::string::npos);
  j = asset("qwen2");
  j["model"]["type"] = "Unigram";
  EXPECT_NE(error_of(j).find("model type 'Unigram': not supported"), std::string::npos);
  j = asset("llama");
  j["decoder"]["decoders"][1] = {{"type", "CTC"}};
  EXPECT_NE(error_of(j).find("decoder type 'CTC': not supported"), std::string::npos);
  j = asset("llama");
  j["post_processor"] = {{"type", "RobertaProcessing"}};
  EXPECT_NE(error_of(j).find("post_processor type 'RobertaProcessing': not supported"), std::string::npos);
  j = asset("llama");
  j["truncation"] = {{"max_length", 10}};
  EXPECT_NE(error_of(j).find("truncation"), std::string::npos);
}

TEST(Tokenizer, MalformedFilesAreErrorsNotExceptions) {
  EXPECT_NE(Tokenizer::from_json("{", "", "x").status().message().find("x: "), std::string::npos);
  EXPECT_FALSE(Tokenizer::from_json("[]", "", "x").ok());
  EXPECT_FALSE(Tokenizer::from_json("{}", "", "x").ok());
  auto j = asset("qwen2");
  j["model"]["merges"][0] = 7;
  EXPECT_NE(error_of(j).find("merge 0"), std::string::npos);
  j = asset("qwen2");
  j["model"]["vocab"]["x"] = "seven";
  EXPECT_NE(error_of(j).find("vocab id of 'x'"), std::string::npos);
  j = asset("qwen2");
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_NE(error_of(j).find("does not compile"), std::string::npos);
  j = asset("qwen2");
  j["added_tokens"][0]["content"] = 5;
  EXPECT_NE(error_of(j).find("content"), std::string::npos);
  EXPECT_NE(error_of(asset("qwen2"), R"({"eos_token": "<nope>"})").find("'<nope>' is not a token"), std::string::npos);
  j = asset("qwen2");
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_EQ(error_of(j), "/m/tokenizer.json: pre_tokenizer Split: regex '(unclosed' does not compile: "
                         "missing closing parenthesis");
  auto missing = Tokenizer::load("/nonexistent/model");
  EXPECT_NE(missing.status().message().find("/nonexistent/model/tokenizer.json"), std::string::npos);
}

// Every value of the file (but the bulk of vocab and merges) replaced by one of another type:
// an error or a working tokenizer, never an exception or a crash.
TEST(Tokenizer, EveryFieldOfTheWrongTypeIsHandled) {
  for (const std::string style : {"qwen2", "llama"}) {
    const nlohmann::json base = asset(style);
    std::vector<nlohmann::json::json_pointer> paths;
    std::function<void(const nlohmann::json&, const nlohmann::json::json_pointer&, int)> walk =
        [&](const nlohmann::json& j, const nlohmann::json::json_pointer& at, int budget) {
          paths.push_back(at);
          if (j.is_object()) {
            int k = 0;
            for (const auto& [key, value] : j.items())
              if (k++ < budget) walk(value, at / key, key == "vocab" ? 3 : 50);
          } else if (j.is_array()) {
            for (std::size_t k = 0; k < j.size() && static_cast<int>(k) < std::min(budget, 3); ++k)
              walk(j[k], at / k, 50);
          }
        };
    walk(base, nlohmann::json::json_pointer(), 50);
    const nlohmann::json replacements[] = {nullptr, 7, -1, 1e300, "x", "", nlohmann::json::array(),
                                           nlohmann::json::object(), true, {{"type", "Sequence"}}};
    int loaded = 0, refused = 0;
    for (const auto& path : paths) {
      for (const auto& r : replacements) {
        nlohmann::json j = base;
        if (path.empty()) j = r;
        else j[path] = r;
        auto t = Tokenizer::from_json(j.dump(), "", "f");
        if (!t.ok()) {
          ++refused;
          EXPECT_EQ(t.status().message().rfind("f", 0), 0u) << t.status().message();
          continue;
        }
        ++loaded;
        const auto ids = t->encode("Hello <s> wörld 123 <|im_end|> 🙂", true);
        (void)t->decode(ids, false);
      }
    }
    EXPECT_GT(refused, 100) << style;
    EXPECT_GT(loaded, 10) << style;
  }
  auto j = asset("qwen2");
  j["model"]["vocab"]["huge"] = 2000000000;
  EXPECT_NE(error_of(j).find("vocab id of 'huge' must be an integer in [0, 16777215]"), std::string::npos);
}

TEST(Tokenizer, ConfigErrorsNameTheConfigFile) {
  const auto dir = std::filesystem::temp_directory_path() / ("sy_test_tokenizer_config_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << asset("qwen2").dump();
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<nope>"})";
  auto t = Tokenizer::load(dir);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), (dir / "tokenizer_config.json").string() + ": eos_token: '<nope>' is not a token of " +
                                      (dir / "tokenizer.json").string());
}

TEST(Tokenizer, ConfigGivesBosAndEos) {
  auto t = Tokenizer::from_json(asset("qwen2").dump(), R"({"bos_token": null, "eos_token": "<|im_end|>"})", "q");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_FALSE(t->bos_token_id());
  EXPECT_EQ(t->bos_token(), "");
  EXPECT_EQ(t->eos_token(), "<|im_end|>");
  EXPECT_EQ(t->eos_token_id(), t->token_to_id("<|im_end|>"));
  EXPECT_TRUE(t->is_special(*t->eos_token_id()));
  EXPECT_FALSE(t->is_special(*t->token_to_id("<think>")));
  EXPECT_EQ(t->id_to_token(*t->eos_token_id()), "<|im_end|>");
  EXPECT_FALSE(t->id_to_token(t->vocab_size()));
}

TEST(Tokenizer, LlamaConfigAddBosAndEosRebuildTheTemplate) {
  const std::string json = asset("llama").dump();
  auto plain = Tokenizer::from_json(json, "", "l");
  ASSERT_TRUE(plain.ok());
  const auto text_ids = plain->encode("Hello", false);
  ASSERT_EQ(plain->encode("Hello", true).front(), 1);  // the file's TemplateProcessing: <s> $A

  auto both = Tokenizer::from_json(
      json, R"({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "eos_token": "</s>", "add_eos_token": true})",
      "l");
  ASSERT_TRUE(both.ok()) << both.status().message();
  auto ids = both->encode("Hello", true);
  ASSERT_EQ(ids.size(), text_ids.size() + 2);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);

  auto none = Tokenizer::from_json(
      json, R"({"tokenizer_class": "LlamaTokenizer", "bos_token": "<s>", "add_bos_token": false})", "l");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->encode("Hello", true), text_ids);
}

TEST(Tokenizer, InvalidUtf8InputIsReadAsReplacementCharacters) {
  auto t = Tokenizer::from_json(asset("qwen2").dump(), "", "q");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->encode("a\xff" "b", false), t->encode("a\xEF\xBF\xBD" "b", false));
  EXPECT_EQ(t->decode(t->encode("a\xff" "b", false), false), "a\xEF\xBF\xBD" "b");
}

TEST(Tokenizer, EncodesTheSameFromManyThreads) {
  auto t = Tokenizer::from_json(asset("qwen2").dump(), "", "q");
  ASSERT_TRUE(t.ok());
  const std::string text = "Threads share one tokenizer: 你好, мир, 🙂 and the word cache.";
  const auto expected = t->encode(text, true);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (int r = 0; r < 200; ++r)
        if (t->encode(text + std::to_string(r % 7 + k), true).size() < expected.size()) ++mismatches;
      if (t->encode(text, true) != expected) ++mismatches;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// HF reads the ids as u32 and refuses what does not fit; a wrapping read would emit another token.
TEST(Tokenizer, TemplateProcessingIdsOutsideTheIdRangeAreRefused) {
  for (const nlohmann::json& bad : {nlohmann::json(-7), nlohmann::json(4294967297LL), nlohmann::json(2.5),
                                   nlohmann::json(16777216)}) {
    auto j = asset("llama");
    j["post_processor"]["special_tokens"]["<s>"]["ids"][0] = bad;
    EXPECT_EQ(error_of(j), "/m/tokenizer.json: post_processor TemplateProcessing: ids of special token '<s>' must be "
                           "integers in [0, 16777215], not " + bad.dump());
  }
  auto j = asset("llama");
  j["post_processor"]["special_tokens"]["<s>"]["ids"][0] = 16777215;
  EXPECT_EQ(error_of(j), "");
  j = asset("qwen2");
  j["added_tokens"][0]["id"] = 4294967297LL;
  EXPECT_NE(error_of(j).find("added_tokens: every entry needs an integer \"id\" in [0, 16777215]"), std::string::npos);
}

TEST(Tokenizer, MetaspaceDecoderRefusesAnUnknownPrependScheme) {
  auto j = asset("llama");
  j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "bogus"}};
  EXPECT_EQ(error_of(j), "/m/tokenizer.json: decoder Metaspace: unknown prepend_scheme 'bogus'");
  for (const char* scheme : {"always", "first", "never"}) {
    j["decoder"]["prepend_scheme"] = scheme;
    EXPECT_EQ(error_of(j), "") << scheme;
  }
}

nlohmann::json split_tokenizer(const std::string& regex) {
  return {{"model",
           {{"type", "BPE"},
            {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {" ", 3}, {"ab", 4}, {"<unk>", 5}}},
            {"merges", {"a b"}},
            {"unk_token", "<unk>"}}},
          {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Removed"}, {"invert", false}}}};
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// A repeated group takes JIT stack per repetition: beyond PCRE2's default 32 KiB the match used
// to fail and the failure read as "no match", so the whole text became tokens.
TEST(Tokenizer, LongMatchesOfARepeatedGroupNeedMoreThanTheDefaultJitStack) {
  auto t = Tokenizer::from_json(split_tokenizer("(?:a|b)+").dump(), "", "/m/tokenizer.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  for (int n : {100, 5000, 100000}) {
    auto ids = t->try_encode(repeat("ab", n) + "c", false);
    ASSERT_TRUE(ids.ok()) << ids.status().message();
    EXPECT_EQ(*ids, std::vector<std::int32_t>{2}) << n;
  }
}

// What PCRE2 still gives up on (its match limit) is an error naming the regex, not wrong ids.
TEST(Tokenizer, ARegexThatGivesUpIsAnEncodeError) {
  auto t = Tokenizer::from_json(split_tokenizer("(a+)+$").dump(), "", "/m/tokenizer.json");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const std::string text = std::string(40, 'a') + "b";
  auto ids = t->try_encode(text, false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().message().rfind("/m/tokenizer.json: pre_tokenizer Split: regex '(a+)+$' failed at byte 0 of a "
                                         "piece of 41 bytes: ", 0),
            0u)
      << ids.status().message();
  EXPECT_NE(ids.status().message().find("limit"), std::string::npos) << ids.status().message();
  EXPECT_TRUE(t->encode(text, false).empty());
  auto fine = t->try_encode("aab", false);
  ASSERT_TRUE(fine.ok()) << fine.status().message();
}

}  // namespace
}  // namespace sy::text
