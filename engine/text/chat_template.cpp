#include "engine/text/chat_template.h"

#include <fstream>
#include <sstream>

#include "base/json_parse.h"
#include "engine/text/jinja/interpreter.h"
#include "engine/text/jinja/parser.h"

namespace sy::text {
namespace fs = std::filesystem;

StatusOr<ChatTemplate> ChatTemplate::parse(std::string_view source, std::string_view origin) {
  auto t = jinja::parse_template(source, origin);
  if (!t.ok()) return t.status();
  ChatTemplate ct;
  ct.source_ = std::make_shared<const std::string>(source);
  ct.template_ = std::make_shared<const jinja::Template>(std::move(*t));
  return ct;
}

namespace {

StatusOr<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Error("cannot read " + path.string());
  return ss.str();
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::load(const fs::path& model_dir) {
  std::error_code ec;
  // chat_template.jinja first: transformers loads it over tokenizer_config.json's template
  // (checkpoints saved by transformers >= 4.43 keep both, and the file is the newer one).
  const fs::path jinja_path = model_dir / "chat_template.jinja";
  if (fs::exists(jinja_path, ec)) {
    auto text = read_file(jinja_path);
    if (!text.ok()) return text.status();
    return parse(*text, jinja_path.string());
  }
  const fs::path config_path = model_dir / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    auto text = read_file(config_path);
    if (!text.ok()) return text.status();
    auto config = parse_json(*text);
    if (!config.ok()) return config.status().with_context(config_path.string());
    if (config->is_object() && config->contains("chat_template")) {
      const auto& ct = (*config)["chat_template"];
      const std::string origin = config_path.string() + " chat_template";
      if (ct.is_string()) return parse(ct.get<std::string>(), origin);
      if (ct.is_array()) {
        for (const auto& entry : ct) {
          if (entry.is_object() && entry.contains("name") && entry["name"] == "default" &&
              entry.contains("template") && entry["template"].is_string())
            return parse(entry["template"].get<std::string>(), origin + " 'default'");
        }
        return Status::Error(config_path.string() + ": \"chat_template\" is a list without a \"default\" entry");
      }
      if (!ct.is_null())
        return Status::Error(config_path.string() + ": \"chat_template\" must be a string or a list of {name, template}");
    }
  }
  return Status::Error(model_dir.string() + ": no chat template (neither chat_template.jinja nor \"chat_template\" "
                       "in tokenizer_config.json)");
}

const std::string& ChatTemplate::origin() const { return template_->origin; }

namespace {

template <class Json>
StatusOr<std::string> render_with(const jinja::Template& t, const Json& context) {
  if (!context.is_object()) return Status::Error(t.origin + ": the chat template context must be a JSON object");
  jinja::Value v = jinja::Value::from_json(context);
  jinja::Dict vars = v.as_dict();
  auto add_default = [&](const char* key, jinja::Value def) {
    if (!v.find(key)) vars.emplace_back(jinja::Value::string(key), std::move(def));
  };
  add_default("add_generation_prompt", jinja::Value::boolean(false));
  add_default("tools", jinja::Value::none());
  add_default("documents", jinja::Value::none());
  return jinja::render(t, jinja::Value::dict(std::move(vars)));
}

}  // namespace

StatusOr<std::string> ChatTemplate::render(const nlohmann::json& context) const {
  return render_with(*template_, context);
}

StatusOr<std::string> ChatTemplate::render(const nlohmann::ordered_json& context) const {
  return render_with(*template_, context);
}

StatusOr<std::string> cut_after_final_message(std::string rendered, const std::string& final_content) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const std::size_t first = final_content.find_first_not_of(kSpace);
  const std::string_view content = final_content;
  const std::string_view lstripped = first == std::string::npos ? std::string_view{} : content.substr(first);
  const std::string_view stripped = lstripped.substr(0, lstripped.find_last_not_of(kSpace) + 1);
  const std::size_t at = rendered.rfind(stripped);
  if (at == std::string::npos)
    return Status::Error("the final message does not appear in the chat after applying the chat template (the "
                         "template deletes portions of it), so there is nothing to continue");
  // The template kept the message as given (or it has no trailing whitespace): cut after it all;
  // else the template trimmed its trailing whitespace, and the cut is after the stripped text.
  const bool kept = std::string_view(rendered).substr(at, lstripped.size()) == content;
  rendered.resize(at + (kept ? lstripped.size() : stripped.size()));
  return rendered;
}

}  // namespace sy::text
