// Typed reads of tokenizer.json fields: a wrong or missing field becomes a Status naming the
// component and the file, never a JSON exception.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace sy::text {

// "<origin>: <what>: <problem>".
inline Status field_error(const std::string& origin, const std::string& what, const std::string& problem) {
  return Status::Error(origin + ": " + what + ": " + problem);
}

inline StatusOr<std::string> string_field(const nlohmann::json& node, const char* key, const std::string& origin,
                                          const std::string& what) {
  if (!node.is_object() || !node.contains(key) || !node[key].is_string())
    return field_error(origin, what, std::string("\"") + key + "\" must be a string");
  return node[key].get<std::string>();
}

inline StatusOr<bool> bool_field(const nlohmann::json& node, const char* key, bool fallback, const std::string& origin,
                                 const std::string& what) {
  if (!node.is_object() || !node.contains(key) || node[key].is_null()) return fallback;
  if (!node[key].is_boolean()) return field_error(origin, what, std::string("\"") + key + "\" must be true or false");
  return node[key].get<bool>();
}

inline StatusOr<std::string> type_of(const nlohmann::json& node, const std::string& origin, const std::string& what) {
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string())
    return field_error(origin, what, "must be an object with a string \"type\"");
  return node["type"].get<std::string>();
}

// A {"String": s} or {"Regex": r} pattern; sets is_regex.
inline StatusOr<std::string> pattern_field(const nlohmann::json& node, const std::string& origin,
                                           const std::string& what, bool& is_regex) {
  if (!node.is_object() || !node.contains("pattern") || !node["pattern"].is_object())
    return field_error(origin, what, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
  const auto& p = node["pattern"];
  if (p.contains("String") && p["String"].is_string()) {
    is_regex = false;
    return p["String"].get<std::string>();
  }
  if (p.contains("Regex") && p["Regex"].is_string()) {
    is_regex = true;
    return p["Regex"].get<std::string>();
  }
  return field_error(origin, what, "\"pattern\" must be {\"String\": ...} or {\"Regex\": ...}");
}

}  // namespace sy::text
