// The sorted vocabulary (token_vocabulary.h).
#include "engine/structured/token_vocabulary.h"

#include <algorithm>

namespace sy::structured {

TokenVocabulary::TokenVocabulary(std::vector<std::string> bytes, std::vector<std::int32_t> end_tokens)
    : bytes_(std::move(bytes)), end_(std::move(end_tokens)) {
  for (std::size_t id = 0; id < bytes_.size(); ++id)
    if (!bytes_[id].empty() && !is_end(static_cast<std::int32_t>(id))) sorted_.push_back(static_cast<std::int32_t>(id));
  std::sort(sorted_.begin(), sorted_.end(), [this](std::int32_t x, std::int32_t y) {
    const std::string& a = bytes_[static_cast<std::size_t>(x)];
    const std::string& b = bytes_[static_cast<std::size_t>(y)];
    return a != b ? a < b : x < y;
  });
  lcp_.assign(sorted_.size(), 0);
  for (std::size_t i = 1; i < sorted_.size(); ++i) {
    const std::string& a = bytes_[static_cast<std::size_t>(sorted_[i - 1])];
    const std::string& b = bytes_[static_cast<std::size_t>(sorted_[i])];
    std::uint32_t k = 0;
    while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
    lcp_[i] = k;
  }
}

bool TokenVocabulary::is_end(std::int32_t id) const { return std::find(end_.begin(), end_.end(), id) != end_.end(); }

}  // namespace sy::structured
