// vLLM's "hermes" tool-call parser (--tool-call-parser hermes, its Hermes2ProToolParser): the
// calls a Qwen or Hermes model writes as <tool_call>{"name": ..., "arguments": ...}</tool_call>
// turned into OpenAI's tool_calls, for whole answers and, held back as needed, for streams.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sy::http {

// One call as OpenAI's answers carry it; arguments are JSON text.
struct ToolCall {
  std::string id;  // "chatcmpl-tool-<32 hex digits>", as vLLM makes them
  std::string name;
  std::string arguments;
};

// What an answer's text says: the content (null when empty, as vLLM) and the calls.
struct ToolCallParse {
  std::optional<std::string> content;
  std::vector<ToolCall> calls;
};

inline constexpr std::string_view kToolCallStart = "<tool_call>";
inline constexpr std::string_view kToolCallEnd = "</tool_call>";

// vLLM's rule (Hermes2ProToolParser.extract_tool_calls): without "<tool_call>" the text is all
// content. Otherwise each "<tool_call>…</tool_call>", and an unterminated last "<tool_call>…" to
// the end, must hold a JSON object with a string "name" and an "arguments" value; the content is
// the text before the first "<tool_call>" (null when empty) and text between or after the calls
// is dropped. One call that is not such JSON (or nests deeper than 256 levels) makes the whole
// text content and no call, as vLLM.
// Each call's arguments are written as Python's json.dumps(ensure_ascii=False) writes them.
ToolCallParse parse_hermes_tool_calls(std::string_view text);

// A fresh tool call id: "chatcmpl-tool-" and 32 random hex digits (vLLM's make_tool_call_id).
std::string new_tool_call_id();

// The same parse over an answer's text as it streams. Content before the first "<tool_call>"
// goes out as it comes, except a tail that may begin the tag, held until the next piece says;
// from the tag on, everything is held until the end, when finish() parses the whole text with
// the rule above, so a stream carries exactly the calls and content of the whole answer.
class HermesToolStream {
 public:
  // The next piece of text; returns the content that may be sent now.
  std::string push(std::string_view text);
  // At the end of the answer: content not sent yet (all the held text when it made no call)
  // and the calls.
  struct End {
    std::string content;
    std::vector<ToolCall> calls;
  };
  End finish();

 private:
  std::string text_;          // everything pushed
  std::size_t sent_ = 0;      // bytes of text_ sent as content
  bool in_call_ = false;      // "<tool_call>" was seen: hold the rest until finish()
};

}  // namespace sy::http
