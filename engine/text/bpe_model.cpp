// BPE as Hugging Face's tokenizers::models::bpe (see bpe_model.h).
#include "engine/text/bpe_model.h"

#include <cstdio>
#include <mutex>
#include <queue>
#include <shared_mutex>

#include "engine/text/json_fields.h"
#include "engine/text/utf8.h"

namespace sy::text {

// Words already tokenized. Bounded as HF's (10 000 words, none longer than 256 bytes): once
// full, new words are tokenized but not remembered.
struct BpeModel::Cache {
  static constexpr std::size_t kCapacity = 10000;
  static constexpr std::size_t kMaxWord = 256;
  mutable std::shared_mutex mutex;
  std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> words;
};

BpeModel::BpeModel() : cache_(std::make_unique<Cache>()) {}
BpeModel::BpeModel(BpeModel&&) noexcept = default;
BpeModel& BpeModel::operator=(BpeModel&&) noexcept = default;
BpeModel::~BpeModel() = default;

StatusOr<BpeModel> BpeModel::parse(const nlohmann::json& node, const std::string& origin) {
  auto type = type_of(node, origin, "model");
  if (!type.ok()) return type.status();
  if (*type != "BPE")
    return field_error(origin, "model type '" + *type + "'", "not supported (supported: BPE)");
  const std::string what = "model BPE";
  BpeModel m;
  if (node.contains("dropout") && !node["dropout"].is_null() &&
      !(node["dropout"].is_number() && node["dropout"].get<double>() == 0.0))
    return field_error(origin, what, "dropout is not supported (it makes encoding random)");
  for (const char* key : {"fuse_unk", "byte_fallback", "ignore_merges"}) {
    auto v = bool_field(node, key, false, origin, what);
    if (!v.ok()) return v.status();
    (std::string(key) == "fuse_unk" ? m.fuse_unk_ : std::string(key) == "byte_fallback" ? m.byte_fallback_
                                                                                         : m.ignore_merges_) = *v;
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!node.contains(key) || node[key].is_null()) continue;
    if (!node[key].is_string()) return field_error(origin, what, std::string("\"") + key + "\" must be a string");
    (std::string(key) == "continuing_subword_prefix" ? m.continuing_subword_prefix_ : m.end_of_word_suffix_) =
        node[key].get<std::string>();
  }

  if (!node.contains("vocab") || !node["vocab"].is_object())
    return field_error(origin, what, "\"vocab\" must be an object of token: id");
  std::int32_t max_id = -1;
  for (const auto& [token, id] : node["vocab"].items()) {
    if (!is_token_id(id))
      return field_error(origin, what, "vocab id of '" + token + "' must be an integer in [0, " +
                                           std::to_string(kMaxTokenId) + "]");
    const auto v = static_cast<std::int32_t>(id.get<std::int64_t>());
    m.vocab_[token] = v;
    max_id = std::max(max_id, v);
  }
  m.id_to_token_.resize(static_cast<std::size_t>(max_id + 1));
  m.has_id_.assign(static_cast<std::size_t>(max_id + 1), false);
  for (const auto& [token, id] : m.vocab_) {
    m.id_to_token_[static_cast<std::size_t>(id)] = token;
    m.has_id_[static_cast<std::size_t>(id)] = true;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    auto it = m.vocab_.find(std::string_view(name));
    m.byte_ids_[b] = it == m.vocab_.end() ? -1 : it->second;
  }

  if (node.contains("unk_token") && !node["unk_token"].is_null()) {
    if (!node["unk_token"].is_string()) return field_error(origin, what, "\"unk_token\" must be a string");
    const std::string unk = node["unk_token"].get<std::string>();
    auto it = m.vocab_.find(unk);
    if (it == m.vocab_.end()) return field_error(origin, what, "unk_token '" + unk + "' is not in the vocab");
    m.unk_id_ = it->second;
  }

  if (!node.contains("merges") || !node["merges"].is_array())
    return field_error(origin, what, "\"merges\" must be a list");
  const auto& merges = node["merges"];
  m.merges_.reserve(merges.size());
  std::int32_t rank = 0;
  for (const auto& merge : merges) {
    std::string a, b;
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const std::size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        return field_error(origin, what, "merge \"" + s + "\" is not two tokens separated by one space");
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      a = merge[0].get<std::string>();
      b = merge[1].get<std::string>();
    } else {
      return field_error(origin, what, "merge " + std::to_string(rank) + " must be \"a b\" or [\"a\", \"b\"]");
    }
    auto ia = m.vocab_.find(a), ib = m.vocab_.find(b);
    if (ia == m.vocab_.end() || ib == m.vocab_.end())
      return field_error(origin, what, "merge '" + a + " " + b + "' uses a token not in the vocab");
    std::string merged = a;
    merged.append(b, b.compare(0, m.continuing_subword_prefix_.size(), m.continuing_subword_prefix_) == 0
                         ? m.continuing_subword_prefix_.size() : 0, std::string::npos);
    auto im = m.vocab_.find(merged);
    if (im == m.vocab_.end())
      return field_error(origin, what, "the merge of '" + a + " " + b + "' is not in the vocab");
    const std::uint64_t key = (static_cast<std::uint64_t>(ia->second) << 32) | static_cast<std::uint32_t>(ib->second);
    m.merges_[key] = {rank, im->second};
    ++rank;
  }
  return m;
}

std::optional<std::int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size() || !has_id_[static_cast<std::size_t>(id)])
    return nullptr;
  return &id_to_token_[static_cast<std::size_t>(id)];
}

void BpeModel::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= Cache::kMaxWord;
  if (cacheable) {
    std::shared_lock lock(cache_->mutex);
    if (auto it = cache_->words.find(word); it != cache_->words.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const std::size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::unique_lock lock(cache_->mutex);
    if (cache_->words.size() < Cache::kCapacity)
      cache_->words.emplace(std::string(word), std::vector<std::int32_t>(out.begin() + static_cast<std::ptrdiff_t>(first), out.end()));
  }
}

namespace {

struct Symbol {
  std::int32_t id;
  std::int32_t prev, next;
  std::size_t len;  // bytes; 0 once merged into its left neighbour
};

struct Merge {
  std::int32_t rank;
  std::int32_t pos;
  std::int32_t new_id;
  // std::priority_queue pops the largest: the lowest rank, then the leftmost position.
  bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

void BpeModel::merge_word(std::string_view w, std::vector<std::int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(w.size());
  auto add = [&](std::int32_t id, std::size_t len) {
    const auto n = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1, len});
  };
  // A pending unknown run (HF fuses consecutive unknown characters when fuse_unk).
  bool has_unk = false;
  std::int32_t unk_id = 0;
  std::size_t unk_len = 0;
  std::string s;
  std::size_t i = 0;
  while (i < w.size()) {
    const std::size_t begin = i;
    next_code_point(w, i);
    const std::string_view ch = w.substr(begin, i - begin);
    const bool is_first = begin == 0, is_last = i == w.size();
    s.clear();
    if (!is_first) s += continuing_subword_prefix_;
    s += ch;
    if (is_last) s += end_of_word_suffix_;
    if (auto it = vocab_.find(s); it != vocab_.end()) {
      if (has_unk) {
        add(unk_id, unk_len);
        has_unk = false;
      }
      add(it->second, ch.size());
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : s) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        for (char c : s) add(byte_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_id_) {
      if (has_unk && fuse_unk_) {
        unk_len += ch.size();
      } else {
        if (has_unk) add(unk_id, unk_len);
        has_unk = true;
        unk_id = *unk_id_;
        unk_len = ch.size();
      }
    }
  }
  if (has_unk) add(unk_id, unk_len);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Merge> queue;
  auto pair_of = [&](std::int32_t a, std::int32_t b) {
    return merges_.find((static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint32_t>(b));
  };
  for (std::size_t k = 0; k + 1 < symbols.size(); ++k)
    if (auto it = pair_of(symbols[k].id, symbols[k + 1].id); it != merges_.end())
      queue.push({it->second.first, static_cast<std::int32_t>(k), it->second.second});

  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& cur = symbols[static_cast<std::size_t>(top.pos)];
    if (cur.len == 0 || cur.next == -1) continue;
    const Symbol right = symbols[static_cast<std::size_t>(cur.next)];
    auto it = pair_of(cur.id, right.id);
    if (it == merges_.end() || it->second.second != top.new_id) continue;  // stale entry
    symbols[static_cast<std::size_t>(cur.next)].len = 0;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    if (right.next >= 0 && static_cast<std::size_t>(right.next) < symbols.size())
      symbols[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0) {
      const Symbol& prev = symbols[static_cast<std::size_t>(cur.prev)];
      if (auto p = pair_of(prev.id, cur.id); p != merges_.end())
        queue.push({p->second.first, cur.prev, p->second.second});
    }
    if (cur.next >= 0 && static_cast<std::size_t>(cur.next) < symbols.size()) {
      const Symbol& next = symbols[static_cast<std::size_t>(cur.next)];
      if (auto p = pair_of(cur.id, next.id); p != merges_.end())
        queue.push({p->second.first, top.pos, p->second.second});
    }
  }
  for (const Symbol& sym : symbols)
    if (sym.len != 0) out.push_back(sym.id);
}

}  // namespace sy::text
