#include "engine/serving/http/python_json.h"

namespace sy::http {

// nlohmann writes strings and numbers as Python does here (control characters escaped,
// everything else as is; shortest round-trip floats with a ".0" on whole ones).
void python_dumps(const nlohmann::ordered_json& v, std::string& out) {
  using ojson = nlohmann::ordered_json;
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += ojson(key).dump(-1, ' ', false, ojson::error_handler_t::replace);
      out += ": ";
      python_dumps(item, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (i) out += ", ";
      python_dumps(v[i], out);
    }
    out += ']';
  } else {
    out += v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  }
}

}  // namespace sy::http
