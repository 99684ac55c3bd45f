// Fuzzes the two tokenizers make-model ships (byte-level Qwen2 and Metaspace/byte-fallback
// Llama) with arbitrary text and arbitrary ids. The first byte picks the tokenizer and whether
// the rest is text or ids. Properties: every id encode() gives is in the vocabulary, and the
// streaming detokenizer's pieces, joined, equal decode() of the same ids (what the HTTP server
// relies on so a stream never differs from the whole answer).
#include <cstring>
#include <string>
#include <vector>

#include "engine/sim/hardware_profile.h"
#include "engine/text/incremental_detokenizer.h"
#include "engine/text/tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

const sy::text::Tokenizer& tokenizer(int which) {
  static const auto load = [](const char* style) {
    auto t = sy::text::Tokenizer::load(sy::assets_dir() / "tokenizers" / style);
    if (!t.ok()) fuzz_fail("tokenizer", t.status().message().c_str());
    return std::move(t).value();
  };
  static const sy::text::Tokenizer qwen2 = load("qwen2");
  static const sy::text::Tokenizer llama = load("llama");
  return which == 0 ? qwen2 : llama;
}

void check_stream(const sy::text::Tokenizer& t, const std::vector<std::int32_t>& ids, bool skip_special) {
  sy::text::IncrementalDetokenizer stream(t, skip_special);
  std::string joined;
  for (std::int32_t id : ids) joined += stream.push(id);
  joined += stream.finish();
  if (joined != t.decode(ids, skip_special)) fuzz_fail("tokenizer", "streamed text differs from decode()");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] & 3;
  const sy::text::Tokenizer& t = tokenizer(mode & 1);
  const std::uint8_t* rest = data + 1;
  const std::size_t n = size - 1;
  std::vector<std::int32_t> ids;
  if ((mode & 2) == 0) {
    const std::string_view text(reinterpret_cast<const char*>(rest), n);
    ids = t.encode(text, /*add_special_tokens=*/true);
    for (std::int32_t id : ids)
      if (id < 0 || id >= t.vocab_size()) fuzz_fail("tokenizer", "encode() gave an id outside the vocabulary");
  } else {
    for (std::size_t i = 0; i + 2 <= n; i += 2) {
      std::uint16_t v;
      std::memcpy(&v, rest + i, 2);
      ids.push_back(static_cast<std::int32_t>(v % static_cast<std::uint32_t>(t.vocab_size())));
    }
  }
  check_stream(t, ids, false);
  check_stream(t, ids, true);
  return 0;
}
