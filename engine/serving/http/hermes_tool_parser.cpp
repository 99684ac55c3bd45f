#include "engine/serving/http/hermes_tool_parser.h"

#include <random>

#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "engine/serving/http/python_json.h"

namespace sy::http {
namespace {

using ojson = nlohmann::ordered_json;

// Deeper JSON is not a call (python_dumps recurses; vLLM's json.loads raises RecursionError near
// 1000 levels, and the text is content there too).
constexpr std::size_t kMaxCallNesting = 256;

// One call's text as vLLM reads it: json.loads, then ["name"] and ["arguments"].
std::optional<ToolCall> read_call(std::string_view body) {
  const ojson call = ojson::parse(body, nullptr, /*allow_exceptions=*/false);
  if (call.is_discarded() || !call.is_object() || json_deeper_than(call, kMaxCallNesting)) return std::nullopt;
  const auto name = call.find("name");
  const auto arguments = call.find("arguments");
  if (name == call.end() || !name->is_string() || arguments == call.end()) return std::nullopt;
  ToolCall out{new_tool_call_id(), name->get<std::string>(), {}};
  python_dumps(*arguments, out.arguments);
  return out;
}

}  // namespace

ToolCallParse parse_hermes_tool_calls(std::string_view text) {
  const std::size_t first = text.find(kToolCallStart);
  if (first == std::string_view::npos) return {std::string(text), {}};
  ToolCallParse out;
  // vLLM's regex <tool_call>(.*?)</tool_call>|<tool_call>(.*) (DOTALL), found left to right.
  for (std::size_t at = first; at != std::string_view::npos; at = text.find(kToolCallStart, at)) {
    const std::size_t body = at + kToolCallStart.size();
    const std::size_t end = text.find(kToolCallEnd, body);
    const std::string_view inner = text.substr(body, end == std::string_view::npos ? std::string_view::npos : end - body);
    std::optional<ToolCall> call = read_call(inner);
    if (!call) return {std::string(text), {}};  // one bad call: all of it is content
    out.calls.push_back(std::move(*call));
    if (end == std::string_view::npos) break;
    at = end + kToolCallEnd.size();
  }
  if (first > 0) out.content = std::string(text.substr(0, first));
  return out;
}

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "chatcmpl-tool-";
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = rng();
    for (int i = 0; i < 16; ++i, bits >>= 4) id += kHex[bits & 15];
  }
  return id;
}

std::string HermesToolStream::push(std::string_view piece) {
  text_ += piece;
  if (in_call_) return {};
  const std::size_t tag = text_.find(kToolCallStart, sent_ > kToolCallStart.size() ? sent_ - kToolCallStart.size() : 0);
  std::size_t until = text_.size();
  if (tag != std::string::npos) {
    in_call_ = true;
    until = tag;
  } else {
    // Hold back the longest tail that begins the tag ("<", "<tool", …): a whole character,
    // since the tag begins with one.
    for (std::size_t n = std::min(kToolCallStart.size() - 1, text_.size() - sent_); n > 0; --n) {
      if (std::string_view(text_).substr(text_.size() - n) == kToolCallStart.substr(0, n)) {
        until = text_.size() - n;
        break;
      }
    }
  }
  std::string out = text_.substr(sent_, until - sent_);
  sent_ = until;
  return out;
}

HermesToolStream::End HermesToolStream::finish() {
  ToolCallParse parse = parse_hermes_tool_calls(text_);
  End end;
  // With calls, the content (the text before the first tag) has gone out already; without, the
  // rest of the text is content (held tag-like tail, or everything from a tag whose call was bad).
  if (parse.calls.empty()) end.content = text_.substr(sent_);
  end.calls = std::move(parse.calls);
  sent_ = text_.size();
  return end;
}

}  // namespace sy::http
