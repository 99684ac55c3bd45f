// Fuzzes the chat-template engine (a checkpoint's template is outside input): any source
// parses or gives a named error, and a template that parses renders a conversation with tools
// to text or a named error, within the engine's step and size limits; and continue_final_message's
// cut of that text after the final message ("12:00" as the final content, with and without
// whitespace) is a prefix of it that ends where the content does, or a named error.
#include <string>

#include <nlohmann/json.hpp>

#include "engine/text/chat_template.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Wie spät ist es? 👋"},
      {"role": "assistant", "content": "", "reasoning_content": "think",
       "tool_calls": [{"type": "function", "function": {"name": "clock", "arguments": {"tz": "UTC"}}}]},
      {"role": "tool", "content": "12:00"},
      {"role": "user", "content": ["a", 1, null, {"k": [true, 2.5]}]}
    ],
    "tools": [{"type": "function", "function": {"name": "clock", "parameters": {"type": "object"}}}],
    "add_generation_prompt": true, "enable_thinking": false,
    "bos_token": "<s>", "eos_token": "</s>"
  })");
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  auto t = sy::text::ChatTemplate::parse(source, "fuzz.jinja");
  if (!t.ok()) {
    if (t.status().message().empty()) fuzz_fail("chat_template", "a parse error without a message");
    return 0;
  }
  auto out = t->render(context);
  if (!out.ok() && out.status().message().empty()) fuzz_fail("chat_template", "a render error without a message");
  if (!out.ok()) return 0;
  for (const char* content : {"12:00", " 12:00\n"}) {
    auto cut = sy::text::cut_after_final_message(*out, content);
    if (!cut.ok()) {
      if (cut.status().message().empty()) fuzz_fail("chat_template", "a cut error without a message");
      if (out->find("12:00") != std::string::npos) fuzz_fail("chat_template", "the content is there, yet no cut");
      continue;
    }
    if (out->compare(0, cut->size(), *cut) != 0) fuzz_fail("chat_template", "the cut is not a prefix");
    if (cut->size() < 5 || cut->compare(cut->size() - 5, 5, "12:00") != 0)
      if (cut->size() < 6 || cut->compare(cut->size() - 6, 6, "12:00\n") != 0)
        fuzz_fail("chat_template", "the cut does not end with the final message");
  }
  return 0;
}
