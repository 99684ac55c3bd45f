#include "engine/serving/http/completion_request.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "base/json_depth.h"
#include "base/json_parse.h"
#include "engine/serving/http/forced_tool_calls.h"
#include "engine/structured/schema_compiler.h"
#include "kernels/cpu/logprobs.h"

namespace sy::http {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

// The deepest tools and tool calls may nest: they are copied and rendered recursively (and
// Python's json, vLLM's, gives up near 1000 levels).
constexpr std::size_t kMaxToolNesting = 256;

// Collects the first problem; each check returns false once one is found.
class Checker {
 public:
  explicit Checker(const json& body) : body_(body) {}
  std::optional<ApiError> error;

  const json* get(const char* key) const {
    const auto it = body_.find(key);
    if (it == body_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool fail(const std::string& param, const std::string& message) {
    if (!error) error = ApiError::bad_field(param, message);
    return false;
  }
  template <class Json>
  bool wrong_type(const std::string& param, const Json& v, const std::string& want) {
    return fail(param, "'" + param + "' must be " + want + ", got " + json_kind(v));
  }

  bool boolean(const char* key, bool& out) {
    const json* v = get(key);
    if (!v) return true;
    if (!v->is_boolean()) return wrong_type(key, *v, "a boolean");
    out = v->get<bool>();
    return true;
  }
  // A number in [lo, hi] (lo_open: (lo, hi]).
  bool number(const char* key, float& out, double lo, double hi, bool lo_open = false) {
    const json* v = get(key);
    if (!v) return true;
    if (!v->is_number()) return wrong_type(key, *v, "a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || x > hi || (lo_open ? x <= lo : x < lo))
      return fail(key, "'" + std::string(key) + "' must lie in " + (lo_open ? "(" : "[") + fmt(lo) + ", " + fmt(hi) +
                           "], got " + v->dump());
    out = static_cast<float>(x);
    return true;
  }
  bool integer(const char* key, std::optional<std::int64_t>& out, std::int64_t lo, std::int64_t hi) {
    const json* v = get(key);
    if (!v) return true;
    if (!v->is_number_integer()) return wrong_type(key, *v, "an integer");
    // Beyond int64 (JSON's unsigned integers up to 2^64 - 1) is out of every range: it must not
    // be clamped into one whose top is INT64_MAX (the seed's, as vLLM's).
    const bool beyond = v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t(INT64_MAX);
    const std::int64_t x = beyond ? 0 : v->get<std::int64_t>();  // read only within int64
    if (beyond || x < lo || x > hi)
      return fail(key, "'" + std::string(key) + "' must lie in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "], got " + v->dump());
    out = x;
    return true;
  }
  // A field we accept only at its neutral value (the feature is not implemented).
  bool neutral(const char* key, const std::function<bool(const json&)>& is_neutral, const std::string& what) {
    const json* v = get(key);
    if (!v || is_neutral(*v)) return true;
    return fail(key, what);
  }
  bool token_ids(const std::string& param, const json& v, std::int32_t vocab, std::vector<std::int32_t>& out) {
    out.clear();
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const json& t = v[i];
      if (!t.is_number_integer())
        return fail(param, "'" + param + "[" + std::to_string(i) + "]' must be a token id (an integer), got " +
                               json_kind(t));
      const std::int64_t id = t.is_number_unsigned() && t.get<std::uint64_t>() > std::uint64_t(INT64_MAX)
                                  ? INT64_MAX
                                  : t.get<std::int64_t>();
      if (id < 0 || id >= vocab)
        return fail(param, "'" + param + "[" + std::to_string(i) + "]' = " + std::to_string(id) +
                               " is not a token id of this model (0 to " + std::to_string(vocab - 1) + ")");
      out.push_back(static_cast<std::int32_t>(id));
    }
    return true;
  }

 private:
  static std::string fmt(double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }
  const json& body_;
};

// OpenAI's logit_bias: {"token id": bias in [-100, 100]}, kept sorted by token.
bool parse_logit_bias(Checker& c, const ModelLimits& limits, CompletionRequest& out) {
  const json* v = c.get("logit_bias");
  if (!v) return true;
  if (!v->is_object()) return c.wrong_type("logit_bias", *v, "an object {\"token id\": bias}");
  for (const auto& [key, bias] : v->items()) {
    std::int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 && key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (!digits || id >= limits.vocab_size)
      return c.fail("logit_bias", "'logit_bias' key '" + key + "' is not a token id of this model (0 to " +
                                      std::to_string(limits.vocab_size - 1) + ")");
    if (!bias.is_number() || !(bias.get<double>() >= -100.0 && bias.get<double>() <= 100.0))
      return c.fail("logit_bias", "'logit_bias' of token " + key + " must be a number in [-100, 100], got " + bias.dump());
    out.logit_bias.push_back({static_cast<std::int32_t>(id), bias.get<float>()});
  }
  std::sort(out.logit_bias.begin(), out.logit_bias.end(),
            [](const kernels::TokenBias& a, const kernels::TokenBias& b) { return a.token < b.token; });
  // "01" and "1" name one token: the later of the two would be dropped silently.
  for (std::size_t i = 1; i < out.logit_bias.size(); ++i)
    if (out.logit_bias[i].token == out.logit_bias[i - 1].token)
      return c.fail("logit_bias", "'logit_bias' names token " + std::to_string(out.logit_bias[i].token) + " twice");
  return true;
}

// The deepest a guided-decoding schema may nest (the compiler recurses over it).
constexpr std::size_t kMaxSchemaNesting = 64;

// A JSON schema given in `param` (an object or a boolean; structured_outputs.json may also be
// its JSON text, as vLLM takes it), compiled; errors name the field and the keyword.
bool guided_schema(Checker& c, const std::string& param, const json& given, CompletionRequest& out) {
  json schema = given;
  if (given.is_string()) {
    schema = json::parse(given.get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return c.fail(param, "'" + param + "' must be a JSON schema (an object, or its JSON text)");
  }
  if (!schema.is_object() && !schema.is_boolean()) return c.wrong_type(param, schema, "a JSON schema (an object)");
  if (json_deeper_than(schema, kMaxSchemaNesting))
    return c.fail(param, "'" + param + "' nests deeper than " + std::to_string(kMaxSchemaNesting) + " levels");
  auto grammar = structured::compile_schema(schema);
  if (!grammar.ok()) return c.fail(param, "'" + param + "': " + grammar.status().message());
  out.grammar = *grammar;
  return true;
}

// OpenAI's response_format ({"type": "text" | "json_object" | "json_schema", "json_schema":
// {"name", "schema", "strict"}}) and vLLM's structured_outputs ({"json": schema, "choice":
// [strings], "json_object": true}); either, not both.
bool parse_guided(Checker& c, const ModelLimits& limits, CompletionRequest& out) {
  // tool_choice "required" or a named function guides the answer already.
  const bool by_tools = out.grammar != nullptr;
  const auto both = [&](const std::string& param) {
    return c.fail(param, "'" + param + "' and 'tool_choice' (" +
                             (out.tool_calls_read == CompletionRequest::ToolCallRead::Named ? "a named function"
                                                                                           : std::string("\"required\"")) +
                             ") both constrain the answer: give one");
  };
  if (const json* rf = c.get("response_format")) {
    const std::string kinds = "\"text\", \"json_object\" or \"json_schema\"";
    if (!rf->is_object()) return c.wrong_type("response_format", *rf, "an object {\"type\": " + kinds + "}");
    const auto type = rf->find("type");
    if (type == rf->end() || !type->is_string())
      return c.fail("response_format.type", "'response_format.type' must be " + kinds);
    const std::string t = type->get<std::string>();
    if (by_tools && (t == "json_object" || t == "json_schema")) return both("response_format");
    if (t == "json_object") {
      out.grammar = structured::Grammar::any_object();
      out.guided_param = "response_format";
    } else if (t == "json_schema") {
      const auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object())
        return c.fail("response_format.json_schema",
                      "'response_format.json_schema' must be an object {\"name\", \"schema\", \"strict\"}");
      if (const auto name = js->find("name"); name != js->end() && !name->is_null() && !name->is_string())
        return c.wrong_type("response_format.json_schema.name", *name, "a string");
      if (const auto strict = js->find("strict"); strict != js->end() && !strict->is_null() && !strict->is_boolean())
        return c.wrong_type("response_format.json_schema.strict", *strict, "a boolean");
      const auto schema = js->find("schema");
      if (schema == js->end() || schema->is_null())
        return c.fail("response_format.json_schema.schema", "'response_format.json_schema.schema' is required: the JSON schema the answer follows");
      out.guided_param = "response_format";
      if (!guided_schema(c, "response_format.json_schema.schema", *schema, out)) return false;
    } else if (t != "text") {
      return c.fail("response_format.type", "'response_format.type' must be " + kinds + ", got \"" + t + "\"");
    }
  }
  if (const json* so = c.get("structured_outputs")) {
    if (!so->is_object())
      return c.wrong_type("structured_outputs", *so, "an object {\"json\": schema} or {\"choice\": [strings]}");
    if (out.grammar && !by_tools)
      return c.fail("structured_outputs", "'structured_outputs' and a 'response_format' of type json_object or "
                                          "json_schema both constrain the answer: give one");
    std::vector<std::string> given;
    for (const auto& [key, value] : so->items()) {
      if (value.is_null()) continue;
      const std::string param = "structured_outputs." + key;
      if (key == "json" || key == "choice" || (key == "json_object" && value.is_boolean() && value.get<bool>())) {
        given.push_back(key);
      } else if (key == "json_object" && value.is_boolean()) {
        continue;  // false: no constraint of its own
      } else if (key == "json_object") {
        return c.wrong_type(param, value, "a boolean");
      } else if (key == "regex" || key == "grammar" || key == "structural_tag" || key == "whitespace_pattern") {
        return c.fail(param, "'" + param + "' is not supported (guided decoding here supports structured_outputs.json, "
                                           ".choice and .json_object)");
      } else if (!(value.is_boolean() && !value.get<bool>())) {
        return c.fail(param, "'" + param + "' is not supported (guided decoding here supports structured_outputs.json, "
                                           ".choice and .json_object)");
      }
    }
    if (by_tools && !given.empty()) return both("structured_outputs");
    if (given.size() != 1)
      return c.fail("structured_outputs", "'structured_outputs' must give exactly one of json, choice and json_object, got " +
                                              (given.empty() ? std::string("none") : std::to_string(given.size())));
    out.guided_param = "structured_outputs";
    const std::string& key = given[0];
    const json& value = (*so)[key];
    if (key == "json") {
      if (!guided_schema(c, "structured_outputs.json", value, out)) return false;
    } else if (key == "json_object") {
      out.grammar = structured::Grammar::any_object();
    } else {
      if (!value.is_array() || value.empty())
        return c.fail("structured_outputs.choice", "'structured_outputs.choice' must be a non-empty list of strings");
      std::vector<std::string> choices;
      for (std::size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string() || value[i].get_ref<const std::string&>().empty())
          return c.fail("structured_outputs.choice", "'structured_outputs.choice[" + std::to_string(i) +
                                                         "]' must be a non-empty string, got " + value[i].dump());
        choices.push_back(value[i].get<std::string>());
      }
      out.grammar = structured::Grammar::choice(choices);
    }
  }
  if (out.grammar && !limits.no_guided_reason.empty())
    return c.fail(out.guided_param, "'" + out.guided_param + "' asks for guided decoding (structured output), which this "
                                    "server does not do: " + limits.no_guided_reason);
  return true;
}

// OpenAI's four forms: a string, a list of token ids, and the batch forms, a list of strings or
// a list of lists of ids (all of one kind, as OpenAI's schema and vLLM's take them).
bool parse_prompt(Checker& c, const ModelLimits& limits, CompletionRequest& out) {
  const json* p = c.get("prompt");
  if (!p) return c.fail("prompt", "'prompt' is required: a string or a list of token ids");
  if (p->is_string()) {
    if (p->get_ref<const std::string&>().empty()) return c.fail("prompt", "'prompt' is empty");
    out.prompts.push_back({{}, p->get<std::string>()});
    return true;
  }
  if (!p->is_array())
    return c.wrong_type("prompt", *p, "a string, a list of token ids, a list of strings or a list of lists of token ids");
  if (p->empty()) return c.fail("prompt", "'prompt' is empty");
  const bool strings = p->front().is_string();
  if (!strings && !p->front().is_array()) {
    out.prompts.emplace_back();
    return c.token_ids("prompt", *p, limits.vocab_size, out.prompts.back().ids);
  }
  // A list of prompts. Bounded before anything is kept; with n it is checked again.
  if (p->size() > static_cast<std::size_t>(kMaxPromptChoices))
    return c.fail("prompt", "'prompt' holds " + std::to_string(p->size()) + " prompts: at most " +
                                std::to_string(kMaxPromptChoices) + " in one request (prompts × n)");
  out.prompt_list = true;
  out.prompts.reserve(p->size());
  for (std::size_t i = 0; i < p->size(); ++i) {
    const json& one = (*p)[i];
    const std::string at = "prompt[" + std::to_string(i) + "]";
    if (strings ? !one.is_string() : !one.is_array())
      return c.fail(at, "'" + at + "' must be " + (strings ? "a string" : "a list of token ids") + " as 'prompt[0]' is, got " +
                            json_kind(one) + ": a list of prompts holds strings or lists of token ids, not both");
    // (A JSON string is not a container: its own emptiness is the text's.)
    if (strings ? one.get_ref<const std::string&>().empty() : one.empty()) return c.fail(at, "'" + at + "' is empty");
    out.prompts.emplace_back();
    if (strings) {
      out.prompts.back().text = one.get<std::string>();
    } else if (!c.token_ids(at, one, limits.vocab_size, out.prompts.back().ids)) {
      return false;
    }
  }
  return true;
}

// An assistant message's tool_calls as vLLM hands them to the template (its chat_utils): each as given, with
// function.arguments (OpenAI's JSON text) parsed into its value, and missing or empty arguments
// as {} (vLLM's _postprocess_messages: tool-use templates expect objects, as transformers'
// documentation says).
bool parse_message_tool_calls(Checker& c, const std::string& at, const ojson& calls, ojson& out) {
  const std::string param = at + ".tool_calls";
  if (!calls.is_array()) return c.wrong_type(param, calls, "a list of {\"id\", \"type\", \"function\"}");
  if (json_deeper_than(calls, kMaxToolNesting))
    return c.fail(param, "'" + param + "' nests deeper than " + std::to_string(kMaxToolNesting) + " levels");
  out = ojson::array();
  for (std::size_t j = 0; j < calls.size(); ++j) {
    const std::string cat = param + "[" + std::to_string(j) + "]";
    ojson call = calls[j];
    if (!call.is_object()) return c.wrong_type(cat, call, "an object {\"id\", \"type\", \"function\"}");
    const auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object())
      return c.fail(cat + ".function", "'" + cat + ".function' must be an object {\"name\", \"arguments\"}");
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string())
      return c.fail(cat + ".function.name", "'" + cat + ".function.name' must be a string");
    auto args = fn->find("arguments");
    if (args == fn->end() || args->is_null() || (args->is_string() && args->get_ref<const std::string&>().empty())) {
      (*fn)["arguments"] = ojson::object();
    } else if (args->is_string()) {
      ojson parsed = ojson::parse(args->get_ref<const std::string&>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_discarded())
        return c.fail(cat + ".function.arguments",
                      "'" + cat + ".function.arguments' must be JSON text (the arguments object), got " + args->dump());
      if (json_deeper_than(parsed, kMaxToolNesting))
        return c.fail(cat + ".function.arguments", "'" + cat + ".function.arguments' nests deeper than " +
                                                       std::to_string(kMaxToolNesting) + " levels");
      *args = std::move(parsed);
    } else if (!args->is_object() && !args->is_array()) {
      return c.wrong_type(cat + ".function.arguments", *args, "a string of JSON");
    }
    out.push_back(std::move(call));
  }
  return true;
}

bool parse_messages(Checker& c, const ojson* m, CompletionRequest& out) {
  if (!m || m->is_null()) return c.fail("messages", "'messages' is required: a list of {\"role\", \"content\"}");
  if (!m->is_array()) return c.wrong_type("messages", *m, "a list of {\"role\", \"content\"}");
  if (m->empty()) return c.fail("messages", "'messages' is empty");
  out.messages = ojson::array();
  for (std::size_t i = 0; i < m->size(); ++i) {
    const std::string at = "messages[" + std::to_string(i) + "]";
    const ojson& msg = (*m)[i];
    if (!msg.is_object()) return c.wrong_type(at, msg, "an object {\"role\", \"content\"}");
    const auto role = msg.find("role");
    if (role == msg.end() || !role->is_string())
      return c.fail(at + ".role", "'" + at + ".role' must be a string (system, user, assistant, tool)");
    ojson flat = {{"role", *role}};
    const auto content = msg.find("content");
    if (content == msg.end() || content->is_null()) {
      flat["content"] = "";
    } else if (content->is_string()) {
      flat["content"] = *content;
    } else if (content->is_array()) {
      // Text parts joined by newlines, as vLLM flattens them for string-content templates.
      std::string text;
      for (std::size_t j = 0; j < content->size(); ++j) {
        const ojson& part = (*content)[j];
        const std::string pat = at + ".content[" + std::to_string(j) + "]";
        const auto type = part.is_object() ? part.find("type") : part.end();
        if (!part.is_object() || type == part.end() || *type != "text")
          return c.fail(pat, "'" + pat + "' must be a text part {\"type\": \"text\", \"text\": ...} (only text is supported)");
        const auto t = part.find("text");
        if (t == part.end() || !t->is_string()) return c.fail(pat + ".text", "'" + pat + ".text' must be a string");
        if (!text.empty()) text += "\n";
        text += t->get<std::string>();
      }
      flat["content"] = text;
    } else {
      return c.wrong_type(at + ".content", *content, "a string or a list of text parts");
    }
    // The tool-calling turns, as vLLM keeps them: an assistant's calls, a tool answer's call id.
    if (*role == "assistant") {
      if (const auto calls = msg.find("tool_calls"); calls != msg.end() && !calls->is_null()) {
        if (!parse_message_tool_calls(c, at, *calls, flat["tool_calls"])) return false;
        // vLLM drops an empty list, so that templates take their plain assistant path.
        if (flat["tool_calls"].empty()) flat.erase("tool_calls");
      }
    } else if (*role == "tool") {
      if (const auto id = msg.find("tool_call_id"); id != msg.end() && !id->is_null()) {
        if (!id->is_string()) return c.wrong_type(at + ".tool_call_id", *id, "a string");
        flat["tool_call_id"] = *id;
      }
    }
    if (const auto name = msg.find("name"); name != msg.end() && name->is_string()) flat["name"] = *name;
    out.messages.push_back(std::move(flat));
  }
  return true;
}

// OpenAI's tools, [{"type": "function", "function": {"name", "description", "parameters"}}], as
// vLLM hands them to the template (its request model's dump): "type" then "function", whose
// "name", "description" and "parameters" come first (null when not given), then any other field
// of either as given.
bool parse_tools(Checker& c, const ojson* tools, CompletionRequest& out) {
  if (!tools || tools->is_null()) return true;
  const char* shape = "a list of {\"type\": \"function\", \"function\": {\"name\", \"description\", \"parameters\"}}";
  if (!tools->is_array()) return c.wrong_type("tools", *tools, shape);
  if (json_deeper_than(*tools, kMaxToolNesting))
    return c.fail("tools", "'tools' nests deeper than " + std::to_string(kMaxToolNesting) + " levels");
  out.tools = ojson::array();
  for (std::size_t i = 0; i < tools->size(); ++i) {
    const std::string at = "tools[" + std::to_string(i) + "]";
    const ojson& tool = (*tools)[i];
    if (!tool.is_object()) return c.wrong_type(at, tool, "an object {\"type\": \"function\", \"function\"}");
    const auto type = tool.find("type");
    if (type != tool.end() && *type != "function")
      return c.fail(at + ".type", "'" + at + ".type' must be \"function\" (the only kind of tool), got " + type->dump());
    const auto fn = tool.find("function");
    if (fn == tool.end() || !fn->is_object())
      return c.fail(at + ".function", "'" + at + ".function' must be an object {\"name\", \"description\", \"parameters\"}");
    const std::string fat = at + ".function";
    const auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
      return c.fail(fat + ".name", "'" + fat + ".name' must be a non-empty string");
    const auto description = fn->find("description");
    if (description != fn->end() && !description->is_null() && !description->is_string())
      return c.wrong_type(fat + ".description", *description, "a string");
    const auto parameters = fn->find("parameters");
    if (parameters != fn->end() && !parameters->is_null() && !parameters->is_object())
      return c.wrong_type(fat + ".parameters", *parameters, "an object (a JSON Schema)");
    ojson function = {{"name", *name},
                      {"description", description == fn->end() ? ojson() : *description},
                      {"parameters", parameters == fn->end() ? ojson() : *parameters}};
    for (const auto& [key, value] : fn->items())
      if (key != "name" && key != "description" && key != "parameters") function[key] = value;
    ojson dumped = {{"type", "function"}, {"function", std::move(function)}};
    for (const auto& [key, value] : tool.items())
      if (key != "type" && key != "function") dumped[key] = value;
    out.tools.push_back(std::move(dumped));
  }
  return true;
}

// vLLM's tool_choice: "none", "auto" (the default when tools are given), "required" or a named
// function. "required" and a named function guide the answer with a grammar made from the tools
// (forced_tool_calls.h), as vLLM does; errors in a tool's parameters name that tool.
bool parse_tool_choice(Checker& c, const ModelLimits& limits, CompletionRequest& out) {
  const json* choice = c.get("tool_choice");
  const json* given_tools = c.get("tools");
  std::string mode = !out.tools.is_null() && !out.tools.empty() ? "auto" : "none";
  if (choice) {
    if (choice->is_string()) {
      mode = choice->get<std::string>();
      if (mode != "none" && mode != "auto" && mode != "required")
        return c.fail("tool_choice", "'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                     "{\"type\": \"function\", \"function\": {\"name\"}}, got " + choice->dump());
    } else if (!choice->is_object()) {
      return c.wrong_type("tool_choice", *choice, "\"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\"}}");
    } else {
      mode = "named";
    }
    // vLLM's rule and message: a choice other than "none" needs the tools to choose from.
    if (mode != "none" && !given_tools) return c.fail("tool_choice", "When using `tool_choice`, `tools` must be set.");
    // vLLM (and OpenAI) answer "required" with no tools as "none".
    if (mode == "required" && out.tools.empty()) mode = "none";
  }
  // Each tool's parameters compiled alone first, so that an error names the tool.
  const auto compile_each = [&]() {
    for (std::size_t i = 0; i < out.tools.size(); ++i)
      if (!guided_schema(c, "tools[" + std::to_string(i) + "].function.parameters", json(named_tool_schema(out.tools[i])), out))
        return false;
    return true;
  };
  if (mode == "named") {
    const auto fn = choice->find("function");
    const json* name = nullptr;
    if (fn != choice->end() && fn->is_object())
      if (const auto it = fn->find("name"); it != fn->end()) name = &*it;
    if (!name || !name->is_string())
      return c.fail("tool_choice", "'tool_choice' as an object must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
    for (std::size_t i = 0; i < out.tools.size(); ++i) {
      if (out.tools[i]["function"]["name"] != name->get<std::string>()) continue;
      out.guided_param = "tool_choice";
      out.tool_calls_read = CompletionRequest::ToolCallRead::Named;
      out.tool_choice_name = name->get<std::string>();
      return guided_schema(c, "tools[" + std::to_string(i) + "].function.parameters",
                           json(named_tool_schema(out.tools[i])), out);
    }
    return c.fail("tool_choice", "Tool '" + name->get<std::string>() + "' has not been passed in `tools`.");
  }
  if (mode == "required") {
    if (!compile_each()) return false;
    auto schema = required_tool_calls_schema(out.tools);
    if (!schema.ok()) return c.fail("tools", schema.status().message());
    out.guided_param = "tool_choice";
    out.tool_calls_read = CompletionRequest::ToolCallRead::Required;
    return guided_schema(c, "tool_choice", json(*schema), out);
  }
  if (mode == "auto") {
    // vLLM's rule and message (its flags are serve's too).
    if (!limits.auto_tool_choice)
      return c.fail("tool_choice", "\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set");
    out.tool_calls_read = CompletionRequest::ToolCallRead::Hermes;
  }
  return true;
}

bool parse_stop(Checker& c, const ModelLimits& limits, CompletionRequest& out) {
  if (const json* s = c.get("stop")) {
    if (s->is_string()) {
      out.stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      for (std::size_t i = 0; i < s->size(); ++i) {
        if (!(*s)[i].is_string()) return c.wrong_type("stop", (*s)[i], "a string or a list of strings");
        out.stop.push_back((*s)[i].get<std::string>());
      }
    } else {
      return c.wrong_type("stop", *s, "a string or a list of strings");
    }
    std::erase(out.stop, std::string());
  }
  if (const json* s = c.get("stop_token_ids")) {
    if (!s->is_array()) return c.wrong_type("stop_token_ids", *s, "a list of token ids");
    if (!c.token_ids("stop_token_ids", *s, limits.vocab_size, out.stop_token_ids)) return false;
  }
  return true;
}

}  // namespace

std::optional<ApiError> check_model_field(const json* model, const ModelLimits& limits) {
  if (!model || model->is_null()) return std::nullopt;
  if (!model->is_string()) return ApiError::bad_field("model", "'model' must be a string, got " + json_kind(*model));
  if (model->get<std::string>() != limits.name)
    return ApiError::not_found("The model '" + model->get<std::string>() + "' does not exist (this server serves '" +
                                   limits.name + "')",
                               "model_not_found");
  return std::nullopt;
}

ParsedRequest parse_completion_request(std::string_view body_text, Endpoint endpoint, const ModelLimits& limits) {
  auto parsed = parse_json(body_text);
  if (!parsed.ok()) return ApiError::bad_field("", "the request body is not valid JSON: " + parsed.status().message());
  const json& body = *parsed;
  if (!body.is_object()) return ApiError::bad_field("", "the request body must be a JSON object, got " + json_kind(body));
  CompletionRequest out;
  out.endpoint = endpoint;
  Checker c(body);
  const bool chat = endpoint == Endpoint::ChatCompletions;

  if (auto e = check_model_field(c.get("model"), limits)) return *e;
  // Chat: the messages and tools reach the template, whose tojson prints objects' keys in the
  // order the client wrote them (as Python's dicts keep it): read again, keeping that order.
  ojson ordered;
  if (chat) {
    ordered = ojson::parse(body_text, nullptr, /*allow_exceptions=*/false);
    if (ordered.is_discarded() || !ordered.is_object()) ordered = ojson::object();  // (parsed above already)
  }
  const auto ordered_field = [&](const char* key) -> const ojson* {
    const auto it = ordered.find(key);
    return it == ordered.end() ? nullptr : &*it;
  };
  if (chat ? !parse_messages(c, ordered_field("messages"), out) : !parse_prompt(c, limits, out)) return *c.error;

  std::optional<std::int64_t> n, max_tokens, max_completion, top_k, seed;
  c.integer("n", n, 1, kMaxChoices);
  if (n) out.n = static_cast<std::int32_t>(*n);
  // Every choice of every prompt is an engine request: the answer's size is bounded.
  if (const auto choices = static_cast<std::int64_t>(out.prompts.size()) * out.n; choices > kMaxPromptChoices)
    c.fail("prompt", "'prompt' holds " + std::to_string(out.prompts.size()) + " prompts and n is " +
                         std::to_string(out.n) + ": " + std::to_string(choices) + " choices, more than the " +
                         std::to_string(kMaxPromptChoices) + " one request may ask for (prompts × n)");
  // 0 only with echo (the prompt alone, as OpenAI's legacy API); checked below.
  c.integer("max_tokens", max_tokens, chat ? 1 : 0, std::numeric_limits<std::int32_t>::max());
  if (chat) {
    c.integer("max_completion_tokens", max_completion, 1, std::numeric_limits<std::int32_t>::max());
    if (max_completion) max_tokens = max_completion;
  }
  if (max_tokens) out.max_tokens = static_cast<std::int32_t>(*max_tokens);
  c.number("temperature", out.temperature, 0, 2);
  c.number("top_p", out.top_p, 0, 1, /*lo_open=*/true);
  c.integer("top_k", top_k, -1, limits.vocab_size);
  c.number("min_p", out.min_p, 0, 1);
  c.number("presence_penalty", out.presence_penalty, -2, 2);
  c.number("frequency_penalty", out.frequency_penalty, -2, 2);
  c.number("repetition_penalty", out.repetition_penalty, 0, std::numeric_limits<float>::max(), /*lo_open=*/true);
  if (top_k) out.top_k = *top_k < 0 ? 0 : static_cast<std::int32_t>(*top_k);
  c.integer("seed", seed, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max());
  if (seed) out.seed = static_cast<std::uint64_t>(*seed);
  parse_stop(c, limits, out);
  c.boolean("ignore_eos", out.ignore_eos);
  c.boolean("stream", out.stream);
  if (const json* so = c.get("stream_options")) {
    if (!so->is_object()) {
      c.wrong_type("stream_options", *so, "an object {\"include_usage\": bool}");
    } else if (!out.stream) {
      c.fail("stream_options", "'stream_options' is only allowed with \"stream\": true");
    } else if (const auto iu = so->find("include_usage"); iu != so->end() && !iu->is_null()) {
      if (!iu->is_boolean()) c.wrong_type("stream_options.include_usage", *iu, "a boolean");
      else out.include_usage = iu->get<bool>();
    }
  }
  const auto is_false = [](const json& v) { return v.is_boolean() && !v.get<bool>(); };
  const auto is_empty = [](const json& v) { return (v.is_object() || v.is_array()) && v.empty(); };
  // Completions: logprobs is the number of alternatives (0 gives the chosen token's alone).
  // Chat: logprobs says whether, top_logprobs how many. At most kMaxTopLogprobs, as vLLM.
  std::optional<std::int64_t> logprobs, top_logprobs;
  if (chat) {
    bool want = false;
    c.boolean("logprobs", want);
    c.integer("top_logprobs", top_logprobs, 0, kernels::kMaxTopLogprobs);
    if (top_logprobs && *top_logprobs > 0 && !want)
      c.fail("top_logprobs", "'top_logprobs' needs \"logprobs\": true");
    if (want) out.logprobs = top_logprobs ? static_cast<std::int32_t>(*top_logprobs) : 0;
  } else {
    c.integer("logprobs", logprobs, 0, kernels::kMaxTopLogprobs);
    if (logprobs) out.logprobs = static_cast<std::int32_t>(*logprobs);
  }
  if (chat) {
    // vLLM's chat fields for an assistant reply the client has begun: rendered without the
    // generation prompt and cut after the final message, which the answer continues.
    c.boolean("add_generation_prompt", out.add_generation_prompt);
    c.boolean("continue_final_message", out.continue_final_message);
    if (out.add_generation_prompt && out.continue_final_message)
      c.fail("continue_final_message", "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
    c.neutral("echo", is_false, "'echo' is not supported for chat completions");
    c.neutral("prompt_logprobs", [](const json&) { return false; },
              "'prompt_logprobs' is not supported for chat completions");
  } else {
    c.boolean("echo", out.echo);
    std::optional<std::int64_t> prompt_logprobs;
    c.integer("prompt_logprobs", prompt_logprobs, 0, kernels::kMaxTopLogprobs);
    if (prompt_logprobs) out.prompt_logprobs = static_cast<std::int32_t>(*prompt_logprobs);
    // vLLM's rule and message: the alternatives have no place in a stream's chunks.
    if (out.prompt_logprobs > 0 && out.stream)
      c.fail("prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`.");
    if (max_tokens && *max_tokens == 0 && !out.echo)
      c.fail("max_tokens", "'max_tokens' must be at least 1 (0 only with \"echo\": true, for the prompt alone)");
    // The sim backend has no logits: a promise of the prompt's numbers would be broken.
    if (!limits.logits && out.prompt_logprobs >= 0)
      c.fail("prompt_logprobs", "'prompt_logprobs' needs logits, and this server's backend (sim) computes none");
    if (!limits.logits && out.echo && out.logprobs >= 0)
      c.fail("echo", "'echo' with 'logprobs' needs the prompt's log-probabilities, and this server's backend (sim) "
                     "computes no logits");
  }
  // vLLM's best_of (more candidates than n, the best kept) is not done: only best_of = n.
  c.neutral("best_of", [&](const json& v) { return v.is_number_integer() && v.get<std::int64_t>() == out.n; },
            "'best_of' must equal n (" + std::to_string(out.n) + "): returning the best of more candidates is not supported");
  c.neutral("suffix", [](const json& v) { return v.is_string() && v.get<std::string>().empty(); },
            "'suffix' is not supported");
  parse_logit_bias(c, limits, out);
  if (chat) {
    if (parse_tools(c, ordered_field("tools"), out)) parse_tool_choice(c, limits, out);
    c.boolean("parallel_tool_calls", out.parallel_tool_calls);
  } else {
    // Completions have no tools (vLLM's ignore them; OpenAI's legacy API has none): only the
    // neutral values, so that nobody expects a call.
    c.neutral("tools", is_empty, "'tools' is for chat completions (/v1/chat/completions)");
    // Without tools there is nothing to choose: "none" and "auto" mean the same, anything else
    // asks for a call these answers cannot make.
    c.neutral("tool_choice",
              [](const json& v) { return v.is_string() && (v.get<std::string>() == "none" || v.get<std::string>() == "auto"); },
              "'tool_choice' is for chat completions (/v1/chat/completions)");
  }
  parse_guided(c, limits, out);
  if (c.error) return *c.error;

  // Each id prompt on its own: a prompt too long for the context is named by its index.
  for (std::size_t i = 0; i < out.prompts.size(); ++i) {
    if (out.prompts[i].text) continue;
    auto budget = completion_budget(out, i, static_cast<std::int32_t>(out.prompts[i].ids.size()), limits);
    if (const ApiError* e = std::get_if<ApiError>(&budget)) return *e;
  }
  return out;
}

std::variant<std::int32_t, ApiError> completion_budget(const CompletionRequest& r, std::size_t index,
                                                       std::int32_t prompt_tokens, const ModelLimits& limits) {
  const std::string param = r.prompt_param(index);
  // "the prompt" or "prompt[3]" in a sentence.
  const std::string named = r.prompt_list ? param : "the " + param;
  if (prompt_tokens >= limits.context)
    return ApiError::bad_field(param, "This model's maximum context length is " + std::to_string(limits.context) +
                                          " tokens, and " + named + " has " + std::to_string(prompt_tokens) +
                                          " tokens, leaving no room for the completion. Please shorten " + named + ".");
  const std::int32_t room = limits.context - prompt_tokens;
  if (!r.max_tokens) return r.endpoint == Endpoint::Completions ? std::min(16, room) : room;
  if (*r.max_tokens > room)
    return ApiError::bad_field("max_tokens", "This model's maximum context length is " + std::to_string(limits.context) +
                                                 " tokens. However, you requested " +
                                                 std::to_string(static_cast<std::int64_t>(prompt_tokens) + *r.max_tokens) +
                                                 " tokens (" + std::to_string(prompt_tokens) + " in " + named + ", " +
                                                 std::to_string(*r.max_tokens) +
                                                 " in the completion). Please reduce the length of " + named +
                                                 " or 'max_tokens'.");
  return *r.max_tokens;
}

}  // namespace sy::http
