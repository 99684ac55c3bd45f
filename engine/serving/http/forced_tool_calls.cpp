#include "engine/serving/http/forced_tool_calls.h"

#include "base/json_depth.h"
#include "engine/serving/http/python_json.h"

namespace sy::http {
namespace {

using ojson = nlohmann::ordered_json;

// A tool's parameters where it gives any: vLLM takes a missing, null or empty object alike.
const ojson* parameters_of(const ojson& tool) {
  const auto fn = tool.find("function");
  if (fn == tool.end() || !fn->is_object()) return nullptr;
  const auto p = fn->find("parameters");
  if (p == fn->end() || p->is_null() || (p->is_object() && p->empty())) return nullptr;
  return &*p;
}

// As deep as the hermes parser reads a call (python_dumps recurses).
constexpr std::size_t kMaxCallNesting = 256;

}  // namespace

ojson named_tool_schema(const ojson& tool) {
  const ojson* p = parameters_of(tool);
  return p ? *p : ojson{{"type", "object"}};
}

StatusOr<ojson> required_tool_calls_schema(const ojson& tools) {
  ojson alternatives = ojson::array();
  ojson defs = ojson::object();
  for (const ojson& tool : tools) {
    const ojson* p = parameters_of(tool);
    ojson parameters = p ? *p : ojson{{"type", "object"}, {"properties", ojson::object()}};
    if (parameters.is_object()) {
      if (const auto d = parameters.find("$defs"); d != parameters.end()) {
        if (d->is_object()) {
          for (const auto& [name, schema] : d->items()) {
            if (const auto had = defs.find(name); had != defs.end() && *had != schema)
              return Status::Error("Tool definition '" + name + "' has multiple schemas, which is not supported.");
            defs[name] = schema;
          }
        }
        parameters.erase("$defs");
      }
    }
    alternatives.push_back({{"type", "object"},
                            {"properties", {{"name", {{"enum", {tool["function"]["name"]}}}}, {"parameters", parameters}}},
                            {"required", {"name", "parameters"}}});
  }
  ojson schema = {{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", std::move(alternatives)}}}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  return schema;
}

ToolCallParse named_tool_call(const std::string& name, std::string_view text) {
  ToolCallParse out;
  out.content = "";
  out.calls.push_back({new_tool_call_id(), name, std::string(text)});
  return out;
}

ToolCallParse required_tool_calls(std::string_view text) {
  const ojson list = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  ToolCallParse none{std::string(text), {}};
  if (list.is_discarded() || !list.is_array() || list.empty() || json_deeper_than(list, kMaxCallNesting)) return none;
  ToolCallParse out;
  out.content = "";
  for (const ojson& item : list) {
    if (!item.is_object()) return none;
    const auto name = item.find("name");
    if (name == item.end() || !name->is_string()) return none;
    ToolCall call{new_tool_call_id(), name->get<std::string>(), {}};
    // vLLM's FunctionDefinition: parameters may be missing (None), then json.dumps writes null.
    const auto parameters = item.find("parameters");
    python_dumps(parameters == item.end() ? ojson(nullptr) : *parameters, call.arguments);
    out.calls.push_back(std::move(call));
  }
  return out;
}

}  // namespace sy::http
