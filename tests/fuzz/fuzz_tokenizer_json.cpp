// Fuzzes tokenizer.json loading (a checkpoint's file is outside input): any text gives a
// tokenizer or a named error, and a tokenizer it accepts encodes and decodes a mixed text with
// every id inside its vocabulary.
#include <string>

#include "engine/text/tokenizer.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  auto t = sy::text::Tokenizer::from_json(json, "", "fuzz/tokenizer.json");
  if (!t.ok()) {
    if (t.status().message().empty()) fuzz_fail("tokenizer_json", "an error without a message");
    return 0;
  }
  const auto ids = t->encode("Hello wörld  \t\n 12345 👋🏽 <|im_end|> <s> 日本語", true);
  for (std::int32_t id : ids)
    if (id < 0 || id >= t->vocab_size()) fuzz_fail("tokenizer_json", "encode() gave an id outside the vocabulary");
  (void)t->decode(ids, false);
  (void)t->decode(ids, true);
  return 0;
}
