#include "base/json_parse.h"

#include <string>

namespace sy {
namespace {

// "[json.exception.parse_error.101] parse error at …": the bracketed id helps nobody.
std::string without_id(std::string what) {
  if (auto close = what.find("] "); what.starts_with("[json.exception") && close != std::string::npos) {
    what = what.substr(close + 2);
  }
  return what;
}

}  // namespace

StatusOr<nlohmann::json> parse_json(std::string_view text) {
  // nlohmann reports a number that overflows a double as out_of_range (406), not parse_error,
  // and from inside the parser: catching only parse_error let it escape to std::terminate.
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::out_of_range& e) {
    if (e.id == 406) {
      return Status::Error(without_id(e.what()) + ": numbers must lie within the range of a double (about ±1.8e308)");
    }
    return Status::Error(without_id(e.what()));
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(without_id(e.what()));
  } catch (const std::exception& e) {
    return Status::Error(std::string("cannot parse JSON: ") + e.what());  // std::bad_alloc on a huge document
  }
}

}  // namespace sy
