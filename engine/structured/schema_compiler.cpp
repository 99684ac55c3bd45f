// JSON schema → Grammar (schema_compiler.h).
#include "engine/structured/schema_compiler.h"

#include <map>
#include <set>
#include <string>

namespace sy::structured {
namespace {

using nlohmann::json;

const std::set<std::string>& annotations() {
  static const std::set<std::string> a = {"title", "description", "default", "examples", "$schema", "$id", "$comment"};
  return a;
}

const std::set<std::string>& supported() {
  static const std::set<std::string> s = {"type",      "properties", "required", "additionalProperties", "enum",
                                          "const",     "items",      "minItems", "maxItems",             "minLength",
                                          "maxLength", "anyOf",      "oneOf",    "$ref",                 "$defs",
                                          "definitions"};
  return s;
}

class Compiler {
 public:
  explicit Compiler(const json& root) : root_(root) {}

  StatusOr<std::int32_t> compile(const json& s, const std::string& at) {
    const std::string where = at.empty() ? "the schema" : "at " + at;
    if (s.is_boolean()) {
      if (!s.get<bool>()) return Status::Error(where + ": the schema false matches nothing");
      return any();
    }
    if (!s.is_object()) return Status::Error(where + ": a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      (void)value;
      if (!supported().contains(key) && !annotations().contains(key))
        return Status::Error(where + ": the keyword '" + key + "' is not supported by guided decoding");
    }
    if (s.contains("$ref")) return ref(s, where);
    if (s.contains("anyOf") || s.contains("oneOf")) {
      const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
      if (s.contains("anyOf") && s.contains("oneOf"))
        return Status::Error(where + ": 'anyOf' and 'oneOf' together are not supported");
      for (const auto& [k, v] : s.items()) {
        (void)v;
        if (k != key && k != "$defs" && k != "definitions" && !annotations().contains(k))
          return Status::Error(where + ": '" + k + "' beside '" + key + "' is not supported (move it into each alternative)");
      }
      const json& list = s[key];
      if (!list.is_array() || list.empty()) return Status::Error(where + ": '" + key + "' must be a non-empty list of schemas");
      const std::int32_t node = add(node_of(Node::Kind::AnyOf));
      std::vector<std::int32_t> alts;
      for (std::size_t i = 0; i < list.size(); ++i) {
        auto alt = compile(list[i], at + "/" + key + "/" + std::to_string(i));
        if (!alt.ok()) return alt.status();
        alts.push_back(*alt);
      }
      nodes()[static_cast<std::size_t>(node)].alternatives = std::move(alts);
      return node;
    }
    // The types: given, or implied by the keywords present; none: any value.
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& e : t) {
          if (!e.is_string()) return Status::Error(where + ": 'type' must be a string or a list of strings");
          types.push_back(e.get<std::string>());
        }
      } else {
        return Status::Error(where + ": 'type' must be a string or a non-empty list of strings");
      }
      static const std::set<std::string> known = {"object", "array", "string", "number", "integer", "boolean", "null"};
      for (const std::string& t1 : types)
        if (!known.contains(t1)) return Status::Error(where + ": 'type' '" + t1 + "' is not a JSON schema type");
    }
    if (s.contains("enum") || s.contains("const")) return literal(s, types, where);
    if (types.empty()) {
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) types = {"object"};
      else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) types = {"array"};
      else if (s.contains("minLength") || s.contains("maxLength")) types = {"string"};
      else return any();
    }
    if (types.size() == 1) return typed(s, types[0], at, where);
    const std::int32_t node = add(node_of(Node::Kind::AnyOf));
    std::vector<std::int32_t> alts;
    for (const std::string& t : types) {
      auto alt = typed(s, t, at, where);
      if (!alt.ok()) return alt.status();
      alts.push_back(*alt);
    }
    nodes()[static_cast<std::size_t>(node)].alternatives = std::move(alts);
    return node;
  }

  std::shared_ptr<Grammar> grammar = std::make_shared<Grammar>();

 private:
  std::vector<Node>& nodes() { return grammar->nodes; }
  std::int32_t add(Node n) {
    nodes().push_back(std::move(n));
    return static_cast<std::int32_t>(nodes().size() - 1);
  }
  std::int32_t any() {
    if (any_ < 0) any_ = grammar->add_any_value();
    return any_;
  }

  static StatusOr<std::int64_t> count(const json& s, const char* key, const std::string& where) {
    if (!s.contains(key)) return std::int64_t{-1};
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > (std::int64_t{1} << 30))
      return Status::Error(where + ": '" + key + "' must be a non-negative integer (at most 2^30)");
    return v.get<std::int64_t>();
  }

  StatusOr<std::int32_t> ref(const json& s, const std::string& where) {
    for (const auto& [k, v] : s.items()) {
      (void)v;
      if (k != "$ref" && k != "$defs" && k != "definitions" && !annotations().contains(k))
        return Status::Error(where + ": '" + k + "' beside '$ref' is not supported");
    }
    if (!s["$ref"].is_string()) return Status::Error(where + ": '$ref' must be a string");
    const std::string target = s["$ref"].get<std::string>();
    if (const auto it = refs_.find(target); it != refs_.end()) return it->second;
    std::string section, name;
    for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
      const std::string p = prefix;
      if (target.compare(0, p.size(), p) == 0) {
        section = p.substr(2, p.size() - 3);
        name = target.substr(p.size());
      }
    }
    if (section.empty() || name.empty() || name.find('/') != std::string::npos || name.find('~') != std::string::npos)
      return Status::Error(where + ": '$ref' '" + target + "' is not supported (only #/$defs/<name> and #/definitions/<name>)");
    if (!root_.is_object() || !root_.contains(section) || !root_[section].is_object() || !root_[section].contains(name))
      return Status::Error(where + ": '$ref' '" + target + "' names no definition in the schema");
    // A placeholder first: a definition may refer to itself (recursive schemas).
    const std::int32_t node = add(node_of(Node::Kind::AnyOf));
    refs_[target] = node;
    auto body = compile(root_[section][name], "/" + section + "/" + name);
    if (!body.ok()) return body.status();
    nodes()[static_cast<std::size_t>(node)].alternatives = {*body};
    return node;
  }

  StatusOr<std::int32_t> literal(const json& s, const std::vector<std::string>& types, const std::string& where) {
    if (s.contains("enum") && s.contains("const")) return Status::Error(where + ": 'enum' and 'const' together are not supported");
    std::vector<json> values;
    if (s.contains("const")) {
      values.push_back(s["const"]);
    } else {
      if (!s["enum"].is_array() || s["enum"].empty()) return Status::Error(where + ": 'enum' must be a non-empty list");
      for (const json& v : s["enum"]) values.push_back(v);
    }
    for (const char* k : {"properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
                          "maxLength"})
      if (s.contains(k)) return Status::Error(where + ": '" + std::string(k) + "' beside 'enum'/'const' is not supported");
    Node n = node_of(Node::Kind::Literal);
    for (const json& v : values) {
      if (!types.empty() && !has_type(v, types)) continue;
      n.texts.push_back(v.dump(-1, ' ', false, json::error_handler_t::strict));
    }
    if (n.texts.empty()) return Status::Error(where + ": no 'enum'/'const' value has the schema's 'type'");
    return add(std::move(n));
  }

  static bool has_type(const json& v, const std::vector<std::string>& types) {
    for (const std::string& t : types) {
      if ((t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "string" && v.is_string()) ||
          (t == "number" && v.is_number()) || (t == "integer" && v.is_number_integer()) ||
          (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null()))
        return true;
    }
    return false;
  }

  StatusOr<std::int32_t> typed(const json& s, const std::string& type, const std::string& at, const std::string& where) {
    if (type == "boolean") return add(node_of(Node::Kind::Literal, [&](Node& n) { n.texts = {"true", "false"}; }));
    if (type == "null") return add(node_of(Node::Kind::Literal, [&](Node& n) { n.texts = {"null"}; }));
    if (type == "number") return add(node_of(Node::Kind::Number));
    if (type == "integer") return add(node_of(Node::Kind::Integer));
    if (type == "string") {
      auto lo = count(s, "minLength", where);
      if (!lo.ok()) return lo.status();
      auto hi = count(s, "maxLength", where);
      if (!hi.ok()) return hi.status();
      Node n = node_of(Node::Kind::String);
      n.min_length = std::max<std::int64_t>(*lo, 0);
      n.max_length = *hi;
      if (n.max_length >= 0 && n.max_length < n.min_length)
        return Status::Error(where + ": 'maxLength' is less than 'minLength'");
      return add(std::move(n));
    }
    if (type == "array") {
      auto lo = count(s, "minItems", where);
      if (!lo.ok()) return lo.status();
      auto hi = count(s, "maxItems", where);
      if (!hi.ok()) return hi.status();
      const std::int32_t node = add(node_of(Node::Kind::Array));
      std::int32_t items = -1;
      if (s.contains("items")) {
        if (s["items"].is_array())
          return Status::Error(where + ": 'items' as a list (tuple validation) is not supported");
        auto it = compile(s["items"], at + "/items");
        if (!it.ok()) return it.status();
        items = *it;
      } else {
        items = any();
      }
      Node& n = nodes()[static_cast<std::size_t>(node)];
      n.items = items;
      n.min_items = std::max<std::int64_t>(*lo, 0);
      n.max_items = *hi;
      if (n.max_items >= 0 && n.max_items < n.min_items) return Status::Error(where + ": 'maxItems' is less than 'minItems'");
      return node;
    }
    // object
    const std::int32_t node = add(node_of(Node::Kind::Object));
    std::vector<std::pair<std::string, std::int32_t>> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Status::Error(where + ": 'properties' must be an object");
      if (s["properties"].size() > kMaxProperties)
        return Status::Error(where + ": 'properties' names " + std::to_string(s["properties"].size()) +
                             " properties, more than guided decoding supports (" + std::to_string(kMaxProperties) + ")");
      for (const auto& [name, sub] : s["properties"].items()) {
        for (const char c : name)
          if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
            return Status::Error(where + ": the property name '" + name +
                                 "' holds a quote, backslash or control character, which guided decoding does not support");
        auto child = compile(sub, at + "/properties/" + name);
        if (!child.ok()) return child.status();
        props.emplace_back(name, *child);
      }
    }
    std::uint64_t required = 0;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Status::Error(where + ": 'required' must be a list of property names");
      for (const json& r : s["required"]) {
        if (!r.is_string()) return Status::Error(where + ": 'required' must be a list of property names");
        std::size_t i = 0;
        while (i < props.size() && props[i].first != r.get<std::string>()) ++i;
        if (i == props.size())
          return Status::Error(where + ": 'required' names '" + r.get<std::string>() +
                               "', which 'properties' does not define (guided decoding needs its schema)");
        required |= std::uint64_t{1} << i;
      }
    }
    std::int32_t additional = -1;
    if (!s.contains("additionalProperties") || s["additionalProperties"].is_boolean()) {
      if (!s.contains("additionalProperties") || s["additionalProperties"].get<bool>()) additional = any();
    } else {
      auto a = compile(s["additionalProperties"], at + "/additionalProperties");
      if (!a.ok()) return a.status();
      additional = *a;
    }
    Node& n = nodes()[static_cast<std::size_t>(node)];
    n.properties = std::move(props);
    n.required = required;
    n.additional = additional;
    return node;
  }

  const json& root_;
  std::int32_t any_ = -1;
  std::map<std::string, std::int32_t> refs_;
};

}  // namespace

StatusOr<std::shared_ptr<const Grammar>> compile_schema(const nlohmann::json& schema) {
  Compiler c(schema);
  auto root = c.compile(schema, "");
  if (!root.ok()) return root.status();
  c.grammar->root = *root;
  return std::shared_ptr<const Grammar>(c.grammar);
}

}  // namespace sy::structured
