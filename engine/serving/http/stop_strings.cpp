#include "engine/serving/http/stop_strings.h"

#include <algorithm>

namespace sy::http {

StopStrings::StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase(stops_, std::string());
}

std::string StopStrings::push(std::string_view text) {
  if (stopped_) return {};
  held_ += text;
  // The earliest match wins; among matches at one place, the longest.
  std::size_t first = std::string::npos;
  for (const std::string& s : stops_) {
    const std::size_t at = held_.find(s);
    if (at == std::string::npos) continue;
    if (at < first || (at == first && s.size() > matched_.size())) {
      first = at;
      matched_ = s;
    }
  }
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that begins some stop string; it starts on a character
  // boundary, since a stop string begins with a whole character.
  std::size_t keep = 0;
  for (const std::string& s : stops_) {
    for (std::size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopStrings::finish() {
  std::string out;
  out.swap(held_);
  return stopped_ ? std::string() : out;
}

}  // namespace sy::http
