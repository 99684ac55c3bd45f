// The byte-level matcher of a Grammar: fed the output's bytes one at a time, it says whether
// each keeps the output a prefix of some text the grammar allows, and whether the output may
// end here. Nondeterminism (anyOf, a list of types) is a set of stacks, one per live reading.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "engine/structured/grammar.h"

namespace sy::structured {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Feeds one byte. False: the byte is not allowed, and the matcher is dead (copy it first to
  // try a byte: copies are cheap, a few small frames).
  bool feed(std::uint8_t byte);
  // Feeds bytes in order; false at the first one not allowed (the matcher is then dead).
  bool feed(std::string_view bytes);
  // The output so far is a whole text of the grammar (it may end here; more may still follow).
  bool accepting() const;
  // No byte can follow: the output is complete.
  bool complete() const;
  bool dead() const { return stacks_.empty(); }
  // The state, for mask_cache.h: matchers of one grammar whose readings are equal allow the same
  // bytes from here on, so they share a token mask. Counters are saturated where the grammar's
  // bounds stop looking at them, so that e.g. every position inside an unbounded string is one state.
  bool same_state(const Matcher& other) const { return grammar_ == other.grammar_ && stacks_ == other.stacks_; }
  std::size_t state_hash() const;
  // The token mask's fast path: when the output is inside a JSON string value at a character
  // boundary (one reading, no escape or UTF-8 character begun), how many more characters the
  // string may take (-1: any number; also inside an object key no named property matches, where
  // other properties are allowed); -2 otherwise.
  std::int64_t string_room() const;

  struct Frame {
    std::uint8_t kind = 0;   // FrameKind in matcher.cpp
    std::uint8_t phase = 0;
    std::uint8_t ws = 0;     // whitespace bytes in a row at this frame's current gap
    std::uint8_t pending = 0;  // UTF-8 continuation bytes still to come (strings, keys)
    std::uint8_t lo = 0x80, hi = 0xBF;  // the next continuation byte's range
    std::int32_t node = -1;
    std::int32_t a = 0;      // array items / string characters / literal or key position
    std::int32_t b = 0;      // literal or key: first live candidate; string: \u digits read
    std::int32_t value = -1; // object: the node of the value after the key just read
    std::uint64_t seen = 0;  // object: properties present
    bool operator==(const Frame&) const = default;
  };
  using Stack = std::vector<Frame>;

 private:
  bool advance(Stack& s, std::uint8_t b, std::vector<Stack>& forks, int depth) const;
  bool start(std::int32_t node, std::uint8_t b, Stack& s, std::vector<Stack>& forks, int depth) const;
  bool step_object(Stack& s, std::uint8_t b, std::vector<Stack>& forks, int depth) const;
  static bool can_end(Stack s, const Grammar& g);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
  std::vector<Stack> forks_;  // scratch of feed()
};

}  // namespace sy::structured
