// The byte-level matcher (matcher.h): one explicit stack of frames per live reading of the
// output, so that a copy is a plain copy of small structs.
#include "engine/structured/matcher.h"

#include <algorithm>
#include <cassert>

namespace sy::structured {
namespace {

enum FrameKind : std::uint8_t { kRoot, kObject, kArray, kString, kNumber, kLiteral };
enum RootPhase : std::uint8_t { kRootBefore, kRootAfter };
enum ObjectPhase : std::uint8_t { kObjOpen, kObjBeforeKey, kObjKey, kObjAfterKey, kObjBeforeValue, kObjAfterValue };
enum ArrayPhase : std::uint8_t { kArrOpen, kArrBefore, kArrAfter };
enum StringPhase : std::uint8_t { kStrChars, kStrEscape, kStrHex };
enum NumberPhase : std::uint8_t { kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumE, kNumESign, kNumExp };

// A nested schema (recursive $ref, anyOf of anyOf…) deeper than this at one value start is
// refused there rather than recursed into forever.
constexpr int kMaxStartDepth = 64;

bool is_ws(std::uint8_t b) { return b == ' ' || b == '\n' || b == '\t'; }
bool is_digit(std::uint8_t b) { return b >= '0' && b <= '9'; }
bool is_hex(std::uint8_t b) { return is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

// A UTF-8 lead byte ≥ 0x80: how many continuation bytes follow and the first one's range
// (no overlong forms, no surrogates, nothing above U+10FFFF). False: not a lead byte.
bool utf8_lead(std::uint8_t b, Matcher::Frame& f) {
  f.lo = 0x80;
  f.hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) f.pending = 1;
  else if (b == 0xE0) f.pending = 2, f.lo = 0xA0;
  else if (b == 0xED) f.pending = 2, f.hi = 0x9F;
  else if (b >= 0xE1 && b <= 0xEF) f.pending = 2;
  else if (b == 0xF0) f.pending = 3, f.lo = 0x90;
  else if (b == 0xF4) f.pending = 3, f.hi = 0x8F;
  else if (b >= 0xF1 && b <= 0xF3) f.pending = 3;
  else return false;
  return true;
}

bool utf8_continue(std::uint8_t b, Matcher::Frame& f) {
  if (b < f.lo || b > f.hi) return false;
  --f.pending;
  f.lo = 0x80;
  f.hi = 0xBF;
  return true;
}

bool number_accepts(std::uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExp;
}

// A literal frame's candidates are the texts that share its first `a` bytes with texts[b].
bool literal_complete(const Node& n, const Matcher::Frame& f) {
  const std::string& cur = n.texts[static_cast<std::size_t>(f.b)];
  const auto pos = static_cast<std::size_t>(f.a);
  for (const std::string& t : n.texts)
    if (t.size() == pos && t.compare(0, pos, cur, 0, pos) == 0) return true;
  return false;
}

bool key_possible(const Node& n, const Matcher::Frame& f) {
  if (n.additional >= 0) return true;
  for (std::size_t i = 0; i < n.properties.size(); ++i)
    if (!(f.seen >> i & 1)) return true;
  return false;
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  Frame root;
  root.kind = kRoot;
  root.phase = kRootBefore;
  root.node = grammar_->root;
  stacks_.push_back(Stack{root});
}

bool Matcher::feed(std::uint8_t byte) {
  forks_.clear();
  std::size_t keep = 0;
  for (std::size_t i = 0; i < stacks_.size(); ++i) {
    if (advance(stacks_[i], byte, forks_, 0)) {
      if (keep != i) stacks_[keep] = std::move(stacks_[i]);
      ++keep;
    }
  }
  stacks_.resize(keep);
  for (Stack& f : forks_) stacks_.push_back(std::move(f));
  if (stacks_.size() > 1) {
    // Readings that became the same (two alternatives that agree so far) are one.
    std::size_t unique = 0;
    for (std::size_t i = 0; i < stacks_.size(); ++i) {
      bool dup = false;
      for (std::size_t j = 0; j < unique && !dup; ++j) dup = stacks_[j] == stacks_[i];
      if (!dup) {
        if (unique != i) stacks_[unique] = std::move(stacks_[i]);
        ++unique;
      }
    }
    stacks_.resize(unique);
  }
  return !stacks_.empty();
}

std::size_t Matcher::state_hash() const {
  // FNV-1a over every field of every frame of every reading.
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (const Stack& s : stacks_) {
    mix(s.size());
    for (const Frame& f : s) {
      mix(static_cast<std::uint64_t>(f.kind) | static_cast<std::uint64_t>(f.phase) << 8 |
          static_cast<std::uint64_t>(f.ws) << 16 | static_cast<std::uint64_t>(f.pending) << 24 |
          static_cast<std::uint64_t>(f.lo) << 32 | static_cast<std::uint64_t>(f.hi) << 40);
      mix(static_cast<std::uint32_t>(f.node) | static_cast<std::uint64_t>(static_cast<std::uint32_t>(f.a)) << 32);
      mix(static_cast<std::uint32_t>(f.b) | static_cast<std::uint64_t>(static_cast<std::uint32_t>(f.value)) << 32);
      mix(f.seen);
    }
  }
  return static_cast<std::size_t>(h);
}

bool Matcher::feed(std::string_view bytes) {
  for (const char c : bytes)
    if (!feed(static_cast<std::uint8_t>(c))) return false;
  return true;
}

bool Matcher::can_end(Stack s, const Grammar& g) {
  while (!s.empty()) {
    const Frame& f = s.back();
    if (f.kind == kRoot) return f.phase == kRootAfter;
    if (f.kind == kNumber && number_accepts(f.phase)) {
      s.pop_back();
    } else if (f.kind == kLiteral && literal_complete(g.nodes[static_cast<std::size_t>(f.node)], f)) {
      s.pop_back();
    } else {
      return false;
    }
  }
  return false;
}

std::int64_t Matcher::string_room() const {
  if (stacks_.size() != 1 || stacks_[0].empty()) return -2;
  const Frame& f = stacks_[0].back();
  const Node& n = grammar_->nodes[static_cast<std::size_t>(f.node)];
  // An object key that no named property begins like any more, where other properties are
  // allowed (json_object's keys): plain characters are all it refuses nothing of.
  if (f.kind == kObject && f.phase == kObjKey && f.pending == 0 && f.b < 0 && n.additional >= 0) return -1;
  if (f.kind != kString || f.phase != kStrChars || f.pending != 0) return -2;
  return n.max_length < 0 ? -1 : std::max<std::int64_t>(n.max_length - f.a, 0);
}

bool Matcher::accepting() const {
  for (const Stack& s : stacks_)
    if (can_end(s, *grammar_)) return true;
  return false;
}

bool Matcher::complete() const {
  if (!accepting()) return false;
  for (int b = 0; b < 256; ++b) {
    Matcher copy = *this;
    if (copy.feed(static_cast<std::uint8_t>(b))) return false;
  }
  return true;
}

bool Matcher::start(std::int32_t node, std::uint8_t b, Stack& s, std::vector<Stack>& forks, int depth) const {
  if (depth > kMaxStartDepth) return false;
  const Node& n = grammar_->nodes[static_cast<std::size_t>(node)];
  Frame f;
  f.node = node;
  switch (n.kind) {
    case Node::Kind::AnyOf: {
      const Stack base = s;
      bool first = false;
      for (const std::int32_t alt : n.alternatives) {
        Stack c = base;
        if (!start(alt, b, c, forks, depth + 1)) continue;
        if (!first) {
          s = std::move(c);
          first = true;
        } else {
          forks.push_back(std::move(c));
        }
      }
      return first;
    }
    case Node::Kind::Object:
      if (b != '{') return false;
      f.kind = kObject;
      f.phase = kObjOpen;
      break;
    case Node::Kind::Array:
      if (b != '[') return false;
      f.kind = kArray;
      f.phase = kArrOpen;
      break;
    case Node::Kind::String:
      if (b != '"') return false;
      f.kind = kString;
      f.phase = kStrChars;
      break;
    case Node::Kind::Number:
    case Node::Kind::Integer:
      f.kind = kNumber;
      if (b == '-') f.phase = kNumMinus;
      else if (b == '0') f.phase = kNumZero;
      else if (b >= '1' && b <= '9') f.phase = kNumInt;
      else return false;
      break;
    case Node::Kind::Literal: {
      f.kind = kLiteral;
      f.b = -1;
      for (std::size_t q = 0; q < n.texts.size() && f.b < 0; ++q)
        if (!n.texts[q].empty() && static_cast<std::uint8_t>(n.texts[q][0]) == b) f.b = static_cast<std::int32_t>(q);
      if (f.b < 0) return false;
      f.a = 1;
      break;
    }
  }
  s.push_back(f);
  return true;
}

bool Matcher::step_object(Stack& s, std::uint8_t b, std::vector<Stack>& forks, int depth) const {
  Frame& f = s.back();
  const Node& n = grammar_->nodes[static_cast<std::size_t>(f.node)];
  const bool gap = f.phase != kObjKey;
  if (gap && is_ws(b)) {
    if (!grammar_->whitespace || f.ws >= kMaxWhitespace) return false;
    ++f.ws;
    return true;
  }
  const auto begin_key = [&] {
    f.phase = kObjKey;
    f.ws = 0;
    f.a = 0;
    f.b = -1;
    f.pending = 0;
    for (std::size_t q = 0; q < n.properties.size() && f.b < 0; ++q)
      if (n.additional >= 0 || !(f.seen >> q & 1)) f.b = static_cast<std::int32_t>(q);
    return true;
  };
  const bool required_met = (n.required & ~f.seen) == 0;
  switch (f.phase) {
    case kObjOpen:
      if (b == '"' && key_possible(n, f)) return begin_key();
      if (b == '}' && required_met) {
        s.pop_back();
        return true;
      }
      return false;
    case kObjBeforeKey:
      return b == '"' && begin_key();
    case kObjKey: {
      const auto pos = static_cast<std::size_t>(f.a);
      if (f.pending == 0 && b == '"') {
        std::int32_t match = -1;
        if (f.b >= 0) {
          const std::string& cur = n.properties[static_cast<std::size_t>(f.b)].first;
          for (std::size_t q = 0; q < n.properties.size() && match < 0; ++q) {
            const std::string& name = n.properties[q].first;
            if (name.size() == pos && name.compare(0, pos, cur, 0, pos) == 0) match = static_cast<std::int32_t>(q);
          }
        }
        if (match >= 0) {
          if (f.seen >> match & 1) return false;  // a property twice
          f.seen |= std::uint64_t{1} << match;
          f.value = n.properties[static_cast<std::size_t>(match)].second;
        } else if (n.additional >= 0) {
          f.value = n.additional;
        } else {
          return false;
        }
        f.phase = kObjAfterKey;
        f.ws = 0;
        return true;
      }
      if (f.pending > 0) {
        if (!utf8_continue(b, f)) return false;
      } else if (b == '\\' || b < 0x20) {
        return false;  // keys are written without escapes
      } else if (b >= 0x80 && !utf8_lead(b, f)) {
        return false;
      }
      if (f.b >= 0) {
        const std::string& cur = n.properties[static_cast<std::size_t>(f.b)].first;
        std::int32_t next = -1;
        for (std::size_t q = 0; q < n.properties.size() && next < 0; ++q) {
          const std::string& name = n.properties[q].first;
          if ((n.additional >= 0 || !(f.seen >> q & 1)) && name.size() > pos &&
              name.compare(0, pos, cur, 0, pos) == 0 && static_cast<std::uint8_t>(name[pos]) == b)
            next = static_cast<std::int32_t>(q);
        }
        f.b = next;
      }
      if (f.b < 0 && n.additional < 0) return false;
      // The position only matters while a named property still matches: past that, frames of
      // any key length are the same state (mask_cache.h finds them equal).
      if (f.b >= 0) ++f.a;
      return true;
    }
    case kObjAfterKey:
      if (b != ':') return false;
      f.phase = kObjBeforeValue;
      f.ws = 0;
      return true;
    case kObjBeforeValue: {
      f.phase = kObjAfterValue;
      f.ws = 0;
      const std::int32_t value = f.value;
      return start(value, b, s, forks, depth + 1);
    }
    case kObjAfterValue:
      if (b == ',' && key_possible(n, f)) {
        f.phase = kObjBeforeKey;
        f.ws = 0;
        return true;
      }
      if (b == '}' && required_met) {
        s.pop_back();
        return true;
      }
      return false;
    default:
      return false;
  }
}

bool Matcher::advance(Stack& s, std::uint8_t b, std::vector<Stack>& forks, int depth) const {
  const Grammar& g = *grammar_;
  while (!s.empty()) {
    Frame& f = s.back();
    const Node& n = g.nodes[static_cast<std::size_t>(f.node)];
    switch (f.kind) {
      case kRoot:
        if (is_ws(b)) {
          if (!g.whitespace || f.ws >= kMaxWhitespace) return false;
          ++f.ws;
          return true;
        }
        if (f.phase != kRootBefore) return false;
        f.phase = kRootAfter;
        f.ws = 0;
        return start(g.root, b, s, forks, depth + 1);
      case kObject:
        return step_object(s, b, forks, depth);
      case kArray: {
        if (is_ws(b)) {
          if (!g.whitespace || f.ws >= kMaxWhitespace) return false;
          ++f.ws;
          return true;
        }
        if (f.phase == kArrAfter) {
          if (b == ',' && (n.max_items < 0 || f.a < n.max_items)) {
            f.phase = kArrBefore;
            f.ws = 0;
            return true;
          }
          if (b == ']' && f.a >= n.min_items) {
            s.pop_back();
            return true;
          }
          return false;
        }
        if (f.phase == kArrOpen && b == ']') {
          if (n.min_items > 0) return false;
          s.pop_back();
          return true;
        }
        if (f.phase == kArrOpen && n.max_items == 0) return false;
        // Items are counted only as far as the bounds look (saturated): equal states compare equal.
        if (f.a < std::max(n.min_items, n.max_items)) ++f.a;
        f.phase = kArrAfter;
        f.ws = 0;
        const std::int32_t items = n.items;
        return start(items, b, s, forks, depth + 1);
      }
      case kString:
        switch (f.phase) {
          case kStrChars:
            if (f.pending > 0) return utf8_continue(b, f);
            if (b == '"') {
              if (f.a < n.min_length) return false;
              s.pop_back();
              return true;
            }
            if (n.max_length >= 0 && f.a >= n.max_length) return false;
            if (b < 0x20) return false;
            if (b >= 0x80 && !utf8_lead(b, f)) return false;
            if (b == '\\') f.phase = kStrEscape;
            // Characters are counted only as far as the length bounds look (saturated), so that
            // an unbounded string's states are one state (mask_cache.h).
            if (f.a < std::max(n.min_length, n.max_length)) ++f.a;
            return true;
          case kStrEscape:
            if (b == 'u') {
              f.phase = kStrHex;
              f.b = 0;
              f.lo = 0x80;
              return true;
            }
            if (b == '"' || b == '\\' || b == '/' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't') {
              f.phase = kStrChars;
              return true;
            }
            return false;
          default:  // kStrHex: \uXXXX outside the surrogates (a JSON parser refuses a lone one)
            if (!is_hex(b)) return false;
            if (f.b == 1 && f.lo == 1 && b > '7') return false;
            f.lo = (f.b == 0 && (b == 'd' || b == 'D')) ? 1 : 0x80;
            if (++f.b == 4) {
              f.phase = kStrChars;
              f.lo = 0x80;
              f.b = 0;
            }
            return true;
        }
      case kNumber: {
        const bool integer = n.kind == Node::Kind::Integer;
        const bool digit = is_digit(b);
        switch (f.phase) {
          case kNumMinus:
            if (b == '0') f.phase = kNumZero;
            else if (digit) f.phase = kNumInt;
            else return false;
            return true;
          case kNumZero:
          case kNumInt:
            if (f.phase == kNumInt && digit) return true;
            if (!integer && b == '.') {
              f.phase = kNumDot;
              return true;
            }
            if (!integer && (b == 'e' || b == 'E')) {
              f.phase = kNumE;
              return true;
            }
            break;  // the number ended: the byte is its parent's
          case kNumDot:
            if (!digit) return false;
            f.phase = kNumFrac;
            return true;
          case kNumFrac:
            if (digit) return true;
            if (b == 'e' || b == 'E') {
              f.phase = kNumE;
              return true;
            }
            break;
          case kNumE:
            if (b == '+' || b == '-') f.phase = kNumESign;
            else if (digit) f.phase = kNumExp;
            else return false;
            return true;
          case kNumESign:
            if (!digit) return false;
            f.phase = kNumExp;
            return true;
          default:  // kNumExp
            if (digit) return true;
            break;
        }
        s.pop_back();
        continue;
      }
      case kLiteral: {
        const std::string& cur = n.texts[static_cast<std::size_t>(f.b)];
        const auto pos = static_cast<std::size_t>(f.a);
        for (std::size_t q = 0; q < n.texts.size(); ++q) {
          const std::string& t = n.texts[q];
          if (t.size() > pos && t.compare(0, pos, cur, 0, pos) == 0 && static_cast<std::uint8_t>(t[pos]) == b) {
            f.b = static_cast<std::int32_t>(q);
            ++f.a;
            return true;
          }
        }
        if (!literal_complete(n, f)) return false;
        s.pop_back();
        continue;  // the literal ended: the byte is its parent's
      }
      default:
        assert(false && "unknown frame kind");
        return false;
    }
  }
  return false;
}

}  // namespace sy::structured
