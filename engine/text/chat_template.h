// A model's chat template: the Jinja text of its chat_template.jinja (or tokenizer_config.json),
// parsed once and rendered per request with the variables transformers' apply_chat_template gives
// jinja2, producing byte for byte the prompt Python would.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::text {

namespace jinja {
struct Template;
}

class ChatTemplate {  // movable, immutable after parse, render() is thread-safe
 public:
  // Parses a Jinja template; errors name origin:line:column and the construct we do not support.
  static StatusOr<ChatTemplate> parse(std::string_view source, std::string_view origin);
  // The template of a model directory: chat_template.jinja, else tokenizer_config.json
  // "chat_template" (a string, or a list of {name, template} where "default" is taken).
  static StatusOr<ChatTemplate> load(const std::filesystem::path& model_dir);

  // context: {"messages": [...], "add_generation_prompt": bool, "bos_token": s, "eos_token": s,
  //           optional "tools", "enable_thinking", ...} exactly as transformers'
  //           apply_chat_template passes them to jinja2. "tools" and "documents" (None) and
  //           "add_generation_prompt" (False) are filled in when absent, as transformers always
  //           passes them. Must be an object.
  StatusOr<std::string> render(const nlohmann::json& context) const;
  // The same from an ordered_json: objects keep their key order, so tool definitions print
  // through tojson in the order the request gave them, as Python dicts do.
  StatusOr<std::string> render(const nlohmann::ordered_json& context) const;

  const std::string& source() const { return *source_; }
  const std::string& origin() const;

 private:
  std::shared_ptr<const std::string> source_;
  std::shared_ptr<const jinja::Template> template_;
};

// transformers' apply_chat_template(continue_final_message=True) after rendering without a
// generation prompt: the rendered chat cut right after the final message's content, so that the
// model continues that message rather than closing it (an assistant reply begun by the client).
// As transformers: the content stripped of whitespace must appear in the rendering (its last
// occurrence is taken), else an error saying the template changed it; where the template kept
// the content's trailing whitespace the cut keeps it too. Whitespace is Python's str.strip()'s
// ASCII part (space, \t, \n, \r, \v, \f); Unicode spaces are kept, where Python strips them.
StatusOr<std::string> cut_after_final_message(std::string rendered, const std::string& final_content);

}  // namespace sy::text
