#include "engine/runtime/config_text.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <vector>

namespace sy {
namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string one_of(std::initializer_list<std::string_view> items) {
  std::string out;
  std::size_t i = 0;
  for (std::string_view item : items) {
    if (i > 0) out += (i + 1 == items.size()) ? " or " : ", ";
    out += item;
    ++i;
  }
  return out;
}

// Typos are the usual cause of an unknown key: point at the key that was probably meant.
std::string did_you_mean(std::string_view key, std::initializer_list<std::string_view> allowed) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (std::string_view candidate : allowed) {
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best.empty() ? std::string() : "; did you mean '" + std::string(best) + "'?";
}

std::string format_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

}  // namespace sy
