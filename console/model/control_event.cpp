#include "console/model/control_event.h"

#include <nlohmann/json.hpp>

namespace sy::console {
namespace {

using nlohmann::json;

// A short rendering of an old/new value: policy objects by name, scalars as they are.
std::string brief(const std::string& text) {
  if (text.empty() || text == "null") return "";
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return text;
  if (j.is_object()) {
    std::string out;
    if (auto it = j.find("name"); it != j.end() && it->is_string()) out = it->get<std::string>();
    if (auto it = j.find("scheduler"); it != j.end() && it->is_string() && out == "async")
      out += "/" + it->get<std::string>();
    if (!out.empty()) return out;
  }
  if (j.is_string()) return j.get<std::string>();
  std::string dumped = j.dump();
  if (dumped.size() > 48) dumped = dumped.substr(0, 45) + "...";
  return dumped;
}

}  // namespace

std::string ControlEvent::label() const {
  if (cmd == "rank_lost") return "process lost: " + (reason.empty() ? brief(new_json) : reason);
  if (cmd == "adaptive_switch")  // nobody asked: the engine says what it chose and why
    return "adaptive: " + brief(old_json) + " -> " + brief(new_json) + (reason.empty() ? "" : " (" + reason + ")");
  if (!ok) return cmd + " failed: " + error;
  const std::string what = phase == "copying" ? cmd + " (copying weights)" : phase.empty() ? cmd : cmd + " (" + phase + ")";
  const std::string from = brief(old_json);
  const std::string to = brief(new_json);
  if (from.empty() && to.empty()) return what;
  return what + ": " + from + " -> " + to;
}

StatusOr<ControlEvent> parse_control_event(const std::string& json_object) {
  json j = json::parse(json_object, nullptr, false);
  if (j.is_discarded()) return Status::Error("control event is not valid JSON");
  if (!j.is_object()) return Status::Error("control event is not a JSON object");
  ControlEvent e;
  auto t = j.find("t_ns");
  if (t == j.end() || !t->is_number()) return Status::Error("control event has no numeric \"t_ns\"");
  e.t_ns = t->is_number_integer() ? t->get<std::int64_t>() : static_cast<std::int64_t>(t->get<double>());
  if (auto it = j.find("cmd"); it != j.end() && it->is_string()) e.cmd = it->get<std::string>();
  if (auto it = j.find("request"); it != j.end()) e.request_json = it->dump();
  if (auto it = j.find("old"); it != j.end()) e.old_json = it->dump();
  if (auto it = j.find("new"); it != j.end()) e.new_json = it->dump();
  if (auto it = j.find("ok"); it != j.end() && it->is_boolean()) e.ok = it->get<bool>();
  if (auto it = j.find("error"); it != j.end() && it->is_string()) e.error = it->get<std::string>();
  if (auto it = j.find("reason"); it != j.end() && it->is_string()) e.reason = it->get<std::string>();
  if (auto it = j.find("phase"); it != j.end() && it->is_string()) e.phase = it->get<std::string>();
  return e;
}

}  // namespace sy::console
