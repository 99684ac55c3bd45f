// The grammar guided decoding follows: a graph of nodes (object, array, string, number, literal
// texts, alternatives) compiled from a JSON-schema subset (schema_compiler.h), OpenAI's
// json_object mode or vLLM's `choice` list, and walked byte by byte by the Matcher.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace sy::structured {

// The most whitespace bytes (space, \n, \t) in a row between two JSON tokens, and before or after
// the value. JSON allows any number; a bound keeps a model that favours whitespace (a random
// one does) from padding forever, and still admits pretty-printed output a few levels deep.
inline constexpr std::uint8_t kMaxWhitespace = 20;
// The most properties one object schema may name: an object's matcher keeps which it has seen
// in a 64-bit set.
inline constexpr std::size_t kMaxProperties = 64;

struct Node {
  enum class Kind : std::uint8_t { Object, Array, String, Number, Integer, Literal, AnyOf };
  Kind kind = Kind::Literal;
  // Object: the named properties in schema order (names hold no '"', '\\' or control bytes),
  // which of them are required (bit i: properties[i]), and the node of any other property's
  // value (-1: no other property is allowed).
  std::vector<std::pair<std::string, std::int32_t>> properties;
  std::uint64_t required = 0;
  std::int32_t additional = -1;
  // Array: the node of every item; the count's bounds (max -1: none).
  std::int32_t items = -1;
  std::int64_t min_items = 0, max_items = -1;
  // String: the length's bounds in characters (an escape is one character; max -1: none).
  std::int64_t min_length = 0, max_length = -1;
  // Literal: the exact byte strings allowed (enum/const values as compact JSON; choices raw).
  std::vector<std::string> texts;
  // AnyOf: the alternatives (anyOf, oneOf taken as anyOf, a list of types).
  std::vector<std::int32_t> alternatives;
  bool operator==(const Node&) const = default;
};

inline Node node_of(Node::Kind kind) {
  Node n;
  n.kind = kind;
  return n;
}
template <class Fill>
Node node_of(Node::Kind kind, Fill fill) {
  Node n = node_of(kind);
  fill(n);
  return n;
}

struct Grammar {
  std::vector<Node> nodes;
  std::int32_t root = -1;
  // JSON grammars allow bounded whitespace around tokens; a choice is the exact text, none.
  bool whitespace = true;

  // OpenAI's response_format json_object: any JSON object.
  static std::shared_ptr<const Grammar> any_object();
  // vLLM's `choice`: the output is exactly one of these strings (non-empty; checked by callers).
  static std::shared_ptr<const Grammar> choice(const std::vector<std::string>& choices);
  // Adds a node that matches any JSON value (and what it needs) and returns its index.
  std::int32_t add_any_value();

  // What the matcher relies on, for a grammar that did not come from this process's compiler
  // (another rank's, over the wire): every node index in range, a known kind, at most
  // kMaxProperties properties whose names are plain JSON string content, required bits among
  // them, bounds that are counts, and at most kMaxNodes nodes.
  Status check() const;
  static constexpr std::size_t kMaxNodes = 1 << 16;

  bool operator==(const Grammar&) const = default;
};

}  // namespace sy::structured
