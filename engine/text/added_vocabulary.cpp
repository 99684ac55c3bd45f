// Added tokens of tokenizer.json (see added_vocabulary.h).
#include "engine/text/added_vocabulary.h"

#include <algorithm>

#include "engine/text/bpe_model.h"
#include "engine/text/json_fields.h"
#include "engine/text/normalizer.h"
#include "engine/text/utf8.h"

namespace sy::text {

StatusOr<AddedVocabulary> AddedVocabulary::parse(const nlohmann::json& node, const Normalizer& normalizer,
                                                 const std::string& origin) {
  AddedVocabulary v;
  v.raw_.resize(256);
  v.norm_.resize(256);
  if (node.is_null()) return v;
  if (!node.is_array()) return field_error(origin, "added_tokens", "must be a list");
  for (const auto& t : node) {
    AddedToken a;
    if (!t.is_object() || !t.contains("id") || !is_token_id(t["id"]))
      return field_error(origin, "added_tokens",
                         "every entry needs an integer \"id\" in [0, " + std::to_string(kMaxTokenId) + "]");
    a.id = static_cast<std::int32_t>(t["id"].get<std::int64_t>());
    auto content = string_field(t, "content", origin, "added token " + std::to_string(a.id));
    if (!content.ok()) return content.status();
    if (content->empty()) return field_error(origin, "added token " + std::to_string(a.id), "content is empty");
    a.content = *content;
    const std::string what = "added token '" + a.content + "'";
    struct Flag { const char* key; bool* value; bool fallback; };
    auto special = bool_field(t, "special", false, origin, what);
    if (!special.ok()) return special.status();
    a.special = *special;
    for (Flag f : {Flag{"normalized", &a.normalized, !a.special}, Flag{"lstrip", &a.lstrip, false},
                   Flag{"rstrip", &a.rstrip, false}, Flag{"single_word", &a.single_word, false}}) {
      auto value = bool_field(t, f.key, f.fallback, origin, what);
      if (!value.ok()) return value.status();
      *f.value = *value;
    }
    v.tokens_.push_back(std::move(a));
  }
  std::int32_t max_id = -1;
  for (const auto& a : v.tokens_) max_id = std::max(max_id, a.id);
  v.by_id_.assign(static_cast<std::size_t>(max_id + 1), -1);
  for (std::size_t k = 0; k < v.tokens_.size(); ++k) {
    AddedToken& a = v.tokens_[k];
    v.by_id_[static_cast<std::size_t>(a.id)] = static_cast<std::int32_t>(k);
    if (a.normalized) {
      auto norm = normalizer.apply(a.content);
      if (!norm.ok()) return norm.status();
      v.tokens_[k].token = std::move(*norm);
    } else {
      v.tokens_[k].token = a.content;
    }
    std::string pattern = v.tokens_[k].token;
    if (pattern.empty()) continue;
    auto& table = a.normalized ? v.norm_ : v.raw_;
    table[static_cast<unsigned char>(pattern[0])].push_back({std::move(pattern), k});
  }
  for (auto* table : {&v.raw_, &v.norm_})
    for (auto& list : *table)
      std::stable_sort(list.begin(), list.end(),
                       [](const Pattern& x, const Pattern& y) { return x.text.size() > y.text.size(); });
  return v;
}

const AddedToken* AddedVocabulary::find(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= by_id_.size() || by_id_[static_cast<std::size_t>(id)] < 0)
    return nullptr;
  return &tokens_[static_cast<std::size_t>(by_id_[static_cast<std::size_t>(id)])];
}

const AddedToken* AddedVocabulary::find(std::string_view content) const {
  for (const auto& a : tokens_)
    if (a.content == content) return &a;
  return nullptr;
}

namespace {

char32_t last_char(std::string_view s) {
  std::size_t b = s.size() - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return next_code_point(s, b);
}

// Rust regex \w$ and ^\w.
bool ends_with_word(std::string_view s) { return !s.empty() && is_word_char(last_char(s)); }
bool starts_with_word(std::string_view s) {
  std::size_t i = 0;
  return !s.empty() && is_word_char(next_code_point(s, i));
}

// Start of the whitespace at the end of s (\s*$).
std::size_t space_leftmost_at_end(std::string_view s) {
  std::size_t end = s.size();
  while (end > 0) {
    std::size_t b = end - 1;
    while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
    std::size_t i = b;
    if (!is_whitespace(next_code_point(s, i))) break;
    end = b;
  }
  return end;
}

// Length of the whitespace at the start of s (^\s*).
std::size_t space_rightmost_at_start(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    if (!is_whitespace(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

}  // namespace

void AddedVocabulary::split(std::string_view text, bool normalized, std::vector<Segment>& out) const {
  const auto& table = normalized ? norm_ : raw_;
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (pos < text.size()) {
    // Leftmost, then longest match.
    const Pattern* hit = nullptr;
    for (; pos < text.size(); ++pos) {
      for (const Pattern& p : table[static_cast<unsigned char>(text[pos])]) {
        if (text.compare(pos, p.text.size(), p.text) == 0) {
          hit = &p;
          break;
        }
      }
      if (hit) break;
    }
    if (!hit) break;
    std::size_t start = pos, stop = pos + hit->text.size();
    pos = stop;  // the search goes on after the match, whatever becomes of it
    const AddedToken& token = tokens_[hit->token];
    if (token.single_word) {
      const bool start_space = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_space = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (token.lstrip) start = std::max(space_leftmost_at_end(text.substr(0, start)), start_offset);
    if (token.rstrip) stop += space_rightmost_at_start(text.substr(stop));
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset != text.size() || text.empty()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace sy::text
