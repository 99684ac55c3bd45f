// The tokenizers of tests/golden/data/tokenizers (made by tools/tokenizers/make_tokenizer_goldens.py
// with Hugging Face tokenizers) must encode and decode exactly as HF did, and the incremental
// detokenizer must stream exactly decode() for every prefix of every id list.
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/json_parse.h"
#include "engine/text/tokenizer.h"
#include "engine/text/utf8.h"

namespace sy::text {
namespace {

const std::filesystem::path kRoot = SY_SOURCE_DIR;
// SY_TOKENIZER_GOLDENS points the tests at another golden set of the same layout (for example
// the many random texts of tools/tokenizers/make_fuzz_goldens.py).
const std::filesystem::path kGoldens = std::getenv("SY_TOKENIZER_GOLDENS")
                                           ? std::filesystem::path(std::getenv("SY_TOKENIZER_GOLDENS"))
                                           : kRoot / "tests" / "golden" / "data" / "tokenizers";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Golden {
  Tokenizer tokenizer;
  nlohmann::json data;
};

Golden load(const std::string& name) {
  auto data = parse_json(slurp(kGoldens / name / "golden.json"));
  EXPECT_TRUE(data.ok()) << data.status().message();
  const auto dir = kRoot / data->at("tokenizer_dir").get<std::string>();
  auto tok = Tokenizer::from_json(slurp(dir / "tokenizer.json"), slurp(kGoldens / name / "tokenizer_config.json"),
                                  (dir / "tokenizer.json").string());
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  return Golden{std::move(*tok), std::move(*data)};
}

std::string show(const std::vector<std::int32_t>& ids) {
  std::string s = "[";
  for (std::size_t k = 0; k < ids.size(); ++k) s += (k ? "," : "") + std::to_string(ids[k]);
  return s + "]";
}

// Streams `ids`; after every id, what was emitted plus what finish() would add must be decode()
// of the prefix, and nothing emitted may be broken UTF-8.
void check_stream(const Tokenizer& tok, const std::vector<std::int32_t>& ids, bool skip, const std::string& what) {
  IncrementalDetokenizer stream(tok, skip);
  std::string emitted;
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const std::string piece = stream.push(ids[k]);
    ASSERT_TRUE(is_valid_utf8(piece)) << what << " after id " << k;
    emitted += piece;
    IncrementalDetokenizer rest = stream;
    const std::string tail = rest.finish();
    const std::vector<std::int32_t> prefix(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k + 1));
    ASSERT_EQ(emitted + tail, tok.decode(prefix, skip)) << what << " prefix " << show(prefix) << " skip " << skip;
  }
}

class TokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGolden, EncodeMatchesHuggingFace) {
  const Golden g = load(GetParam());
  EXPECT_EQ(g.tokenizer.vocab_size(), g.data["vocab_size"].get<std::int32_t>());
  int n = 0;
  for (const auto& c : g.data["cases"]) {
    const std::string text = c["text"].get<std::string>();
    EXPECT_EQ(show(g.tokenizer.encode(text, false)), show(c["ids"].get<std::vector<std::int32_t>>()))
        << GetParam() << " text '" << text << "'";
    EXPECT_EQ(show(g.tokenizer.encode(text, true)), show(c["ids_special"].get<std::vector<std::int32_t>>()))
        << GetParam() << " text '" << text << "' with special tokens";
    ++n;
  }
  EXPECT_GT(n, 50);
}

TEST_P(TokenizerGolden, DecodeMatchesHuggingFace) {
  const Golden g = load(GetParam());
  for (const auto& c : g.data["cases"]) {
    const auto ids = c["ids_special"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(g.tokenizer.decode(ids, false), c["decoded"].get<std::string>()) << GetParam() << " " << show(ids);
    EXPECT_EQ(g.tokenizer.decode(ids, true), c["decoded_skip"].get<std::string>()) << GetParam() << " " << show(ids);
  }
  for (const auto& c : g.data["decode_cases"]) {
    const auto ids = c["ids"].get<std::vector<std::int32_t>>();
    EXPECT_EQ(g.tokenizer.decode(ids, false), c["text"].get<std::string>()) << GetParam() << " " << show(ids);
    EXPECT_EQ(g.tokenizer.decode(ids, true), c["text_skip"].get<std::string>()) << GetParam() << " " << show(ids);
  }
}

TEST_P(TokenizerGolden, IncrementalDetokenizerStreamsDecode) {
  const Golden g = load(GetParam());
  for (bool skip : {false, true}) {
    for (const auto& c : g.data["cases"])
      check_stream(g.tokenizer, c["ids_special"].get<std::vector<std::int32_t>>(), skip, GetParam());
    for (const auto& c : g.data["decode_cases"])
      check_stream(g.tokenizer, c["ids"].get<std::vector<std::int32_t>>(), skip, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, TokenizerGolden,
                         ::testing::Values("qwen2", "llama", "qwen2-large", "llama-large", "llama-metaspace",
                                           "misc-gpt2", "misc-split", "misc-whitespace", "misc-metaspace"),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace sy::text
