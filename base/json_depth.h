// How deep a parsed JSON value nests, found without recursion: values from outside are bounded
// before anything walks them recursively (copies, the template's conversion, tojson).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace sy {

// True when `value` holds arrays or objects nested more than `limit` levels deep (a scalar is
// level 0, [1] level 1).
template <class Json>
bool json_deeper_than(const Json& value, std::size_t limit) {
  std::vector<std::pair<const Json*, std::size_t>> open{{&value, 0}};
  while (!open.empty()) {
    const auto [v, depth] = open.back();
    open.pop_back();
    if (!v->is_structured()) continue;
    if (depth + 1 > limit) return true;
    for (const auto& item : *v) open.emplace_back(&item, depth + 1);
  }
  return false;
}

}  // namespace sy
