// Pre-tokenizers of tokenizer.json (see pre_tokenizer.h), splitting as HF's
// NormalizedString::split does for each SplitDelimiterBehavior.
#include "engine/text/pre_tokenizer.h"

#include "engine/text/json_fields.h"
#include "engine/text/utf8.h"

namespace sy::text {

namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// HF's Whitespace pre-tokenizer keeps the matches of this (TextRegex gives \w and \s Rust's
// meaning).
constexpr const char* kWhitespacePattern = R"(\w+|[^\w\s]+)";

// One char-predicate match per matching character, as HF's Pattern for Fn(char) -> bool.
template <class Pred>
void find_chars(std::string_view text, Pred pred, std::vector<Span>& out) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t b = i;
    const char32_t c = next_code_point(text, i);
    if (pred(c)) out.emplace_back(b, i);
  }
}

}  // namespace

Status PreTokenizer::add(const nlohmann::json& node, const std::string& origin, std::vector<Step>& steps) {
  if (node.is_null()) return Status::Ok();
  auto type = type_of(node, origin, "pre_tokenizer");
  if (!type.ok()) return type.status();
  const std::string& t = *type;
  const std::string what = "pre_tokenizer " + t;
  Step s{};
  if (t == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
      return field_error(origin, what, "\"pretokenizers\" must be a list");
    for (const auto& child : node["pretokenizers"]) SY_RETURN_IF_ERROR(add(child, origin, steps));
    return Status::Ok();
  } else if (t == "ByteLevel") {
    s.kind = Kind::ByteLevel;
    auto aps = bool_field(node, "add_prefix_space", true, origin, what);
    auto ur = bool_field(node, "use_regex", true, origin, what);
    if (!aps.ok()) return aps.status();
    if (!ur.ok()) return ur.status();
    s.add_prefix_space = *aps;
    if (*ur) {
      auto re = TextRegex::compile(kGpt2Pattern, origin + ": " + what);
      if (!re.ok()) return re.status();
      s.regex = std::make_shared<TextRegex>(std::move(*re));
    }
  } else if (t == "Split") {
    s.kind = Kind::Split;
    bool is_regex = false;
    auto p = pattern_field(node, origin, what, is_regex);
    if (!p.ok()) return p.status();
    if (is_regex) {
      auto re = TextRegex::compile(*p, origin + ": " + what);
      if (!re.ok()) return re.status();
      s.regex = std::make_shared<TextRegex>(std::move(*re));
    } else {
      s.literal = *p;
    }
    auto b = string_field(node, "behavior", origin, what);
    if (!b.ok()) return b.status();
    if (*b == "Removed") s.behavior = Behavior::Removed;
    else if (*b == "Isolated") s.behavior = Behavior::Isolated;
    else if (*b == "MergedWithPrevious") s.behavior = Behavior::MergedWithPrevious;
    else if (*b == "MergedWithNext") s.behavior = Behavior::MergedWithNext;
    else if (*b == "Contiguous") s.behavior = Behavior::Contiguous;
    else return field_error(origin, what, "unknown behavior '" + *b + "'");
    auto inv = bool_field(node, "invert", false, origin, what);
    if (!inv.ok()) return inv.status();
    s.invert = *inv;
  } else if (t == "Metaspace") {
    s.kind = Kind::Metaspace;
    auto r = string_field(node, "replacement", origin, what);
    if (!r.ok()) return r.status();
    std::size_t i = 0;
    if (r->empty() || (next_code_point(*r, i), i != r->size()))
      return field_error(origin, what, "\"replacement\" must be one character");
    s.literal = *r;
    if (node.contains("prepend_scheme") && node["prepend_scheme"].is_string()) {
      const std::string scheme = node["prepend_scheme"].get<std::string>();
      if (scheme == "always") s.prepend = Prepend::Always;
      else if (scheme == "first") s.prepend = Prepend::First;
      else if (scheme == "never") s.prepend = Prepend::Never;
      else return field_error(origin, what, "unknown prepend_scheme '" + scheme + "'");
    } else {
      auto aps = bool_field(node, "add_prefix_space", true, origin, what);
      if (!aps.ok()) return aps.status();
      s.prepend = *aps ? Prepend::Always : Prepend::Never;
    }
    auto sp = bool_field(node, "split", true, origin, what);
    if (!sp.ok()) return sp.status();
    s.split = *sp;
  } else if (t == "Digits") {
    s.kind = Kind::Digits;
    auto ind = bool_field(node, "individual_digits", false, origin, what);
    if (!ind.ok()) return ind.status();
    s.individual_digits = *ind;
  } else if (t == "Whitespace") {
    s.kind = Kind::Whitespace;
    auto re = TextRegex::compile(kWhitespacePattern, origin + ": " + what);
    if (!re.ok()) return re.status();
    s.regex = std::make_shared<TextRegex>(std::move(*re));
  } else if (t == "WhitespaceSplit") {
    s.kind = Kind::WhitespaceSplit;
  } else {
    return field_error(origin, "pre_tokenizer type '" + t + "'",
                       "not supported (supported: ByteLevel, Split, Metaspace, Digits, Whitespace, "
                       "WhitespaceSplit, Sequence)");
  }
  steps.push_back(std::move(s));
  return Status::Ok();
}

StatusOr<PreTokenizer> PreTokenizer::parse(const nlohmann::json& node, const std::string& origin) {
  PreTokenizer p;
  SY_RETURN_IF_ERROR(add(node, origin, p.steps_));
  return p;
}

namespace {

struct Cut {
  std::size_t begin, end;
  bool flag;  // is a match; after the behaviour: is removed
};

// HF's NormalizedString::split: matches (and the text between them) turned into pieces.
void split_by(const Piece& piece, const std::vector<Span>& matches, int behavior, bool invert,
              std::vector<Piece>& out) {
  const std::string& text = piece.text;
  std::vector<Cut> cuts;
  if (text.empty()) {
    cuts.push_back({0, 0, false});
  } else {
    std::size_t prev = 0;
    for (const auto& [b, e] : matches) {
      if (prev != b) cuts.push_back({prev, b, false});
      cuts.push_back({b, e, true});
      prev = e;
    }
    if (prev != text.size()) cuts.push_back({prev, text.size(), false});
  }
  if (invert)
    for (Cut& c : cuts) c.flag = !c.flag;

  std::vector<Cut> splits;
  enum { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  switch (behavior) {
    case Removed:
      splits = cuts;
      break;
    case Isolated:
      for (const Cut& c : cuts) splits.push_back({c.begin, c.end, false});
      break;
    case Contiguous: {
      bool previous = false;
      for (const Cut& c : cuts) {
        if (c.flag == previous && !splits.empty()) splits.back().end = c.end;
        else splits.push_back({c.begin, c.end, false});
        previous = c.flag;
      }
      break;
    }
    case MergedWithPrevious: {
      bool previous = false;
      for (const Cut& c : cuts) {
        if (c.flag && !previous && !splits.empty()) splits.back().end = c.end;
        else splits.push_back({c.begin, c.end, false});
        previous = c.flag;
      }
      break;
    }
    case MergedWithNext: {
      bool previous = false;
      for (auto it = cuts.rbegin(); it != cuts.rend(); ++it) {
        if (it->flag && !previous && !splits.empty()) splits.back().begin = it->begin;
        else splits.push_back({it->begin, it->end, false});
        previous = it->flag;
      }
      std::reverse(splits.begin(), splits.end());
      break;
    }
  }
  for (const Cut& c : splits) {
    if (c.flag || c.end == c.begin) continue;
    out.push_back({text.substr(c.begin, c.end - c.begin), piece.at_origin && c.begin == 0});
  }
}

}  // namespace

Status PreTokenizer::apply_step(const Step& s, const Piece& piece, std::vector<Piece>& out) const {
  std::vector<Span> m;
  switch (s.kind) {
    case Kind::Split:
      if (s.regex) SY_RETURN_IF_ERROR(s.regex->find_all(piece.text, m));
      else find_literal(piece.text, s.literal, m);
      split_by(piece, m, static_cast<int>(s.behavior), s.invert, out);
      return Status::Ok();
    case Kind::Digits:
      find_chars(piece.text, is_numeric, m);
      split_by(piece, m, static_cast<int>(s.individual_digits ? Behavior::Isolated : Behavior::Contiguous), false,
               out);
      return Status::Ok();
    case Kind::Whitespace:
      SY_RETURN_IF_ERROR(s.regex->find_all(piece.text, m));
      split_by(piece, m, static_cast<int>(Behavior::Removed), true, out);
      return Status::Ok();
    case Kind::WhitespaceSplit:
      find_chars(piece.text, is_whitespace, m);
      split_by(piece, m, static_cast<int>(Behavior::Removed), false, out);
      return Status::Ok();
    case Kind::Metaspace: {
      Piece p{"", piece.at_origin};
      p.text.reserve(piece.text.size() + 4);
      for (char ch : piece.text) {
        if (ch == ' ') p.text += s.literal;
        else p.text += ch;
      }
      const bool starts = p.text.compare(0, s.literal.size(), s.literal) == 0;
      if (!starts && (s.prepend == Prepend::Always || (s.prepend == Prepend::First && piece.at_origin)))
        p.text.insert(0, s.literal);
      if (!s.split) {
        if (!p.text.empty()) out.push_back(std::move(p));
        return Status::Ok();
      }
      find_literal(p.text, s.literal, m);
      split_by(p, m, static_cast<int>(Behavior::MergedWithNext), false, out);
      return Status::Ok();
    }
    case Kind::ByteLevel: {
      Piece p = piece;
      if (s.add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
      std::vector<Piece> parts;
      if (s.regex) {
        SY_RETURN_IF_ERROR(s.regex->find_all(p.text, m));
        split_by(p, m, static_cast<int>(Behavior::Isolated), false, parts);
      } else if (!p.text.empty()) {
        parts.push_back(std::move(p));
      }
      for (Piece& part : parts) {
        std::string mapped;
        mapped.reserve(part.text.size() * 2);
        for (char ch : part.text) append_utf8(mapped, byte_to_char(static_cast<unsigned char>(ch)));
        out.push_back({std::move(mapped), part.at_origin});
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status PreTokenizer::apply(std::vector<Piece>& pieces) const {
  std::vector<Piece> next;
  for (const Step& s : steps_) {
    next.clear();
    for (const Piece& p : pieces) SY_RETURN_IF_ERROR(apply_step(s, p, next));
    pieces.swap(next);
  }
  return Status::Ok();
}

}  // namespace sy::text
