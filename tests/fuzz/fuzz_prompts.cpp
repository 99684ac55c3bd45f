// Fuzzes the JSONL prompts file of `generate --prompts` (docs/cli.md): any text gives requests
// or an error naming the line, and every accepted request has a non-empty prompt of ids in the
// vocabulary, a non-negative max_new_tokens and an id of its own.
#include <set>
#include <sstream>
#include <string>

#include "engine/serving/workload.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::int32_t kVocab = 100;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto prompts = sy::parse_prompts_jsonl(in, "fuzz.jsonl", kVocab);
  if (!prompts.ok()) {
    if (prompts.status().message().rfind("fuzz.jsonl", 0) != 0)
      fuzz_fail("prompts", ("an error that does not name the file: " + prompts.status().message()).c_str());
    return 0;
  }
  std::set<std::string> ids;
  for (const sy::RequestSpec& r : *prompts) {
    if (r.prompt.empty()) fuzz_fail("prompts", "an empty prompt was accepted");
    for (std::int32_t t : r.prompt)
      if (t < 0 || t >= kVocab) fuzz_fail("prompts", "a token outside the vocabulary was accepted");
    if (r.max_new_tokens < 0) fuzz_fail("prompts", "a negative max_new_tokens was accepted");
    if (!ids.insert(r.external_id).second) fuzz_fail("prompts", "a duplicate id was accepted");
  }
  return 0;
}
