// Token masks (token_mask.h).
#include "engine/structured/token_mask.h"

#include <algorithm>
#include <limits>

namespace sy::structured {
namespace {

void set(std::vector<std::uint32_t>& mask, std::int32_t id) {
  mask[static_cast<std::size_t>(id) / 32] |= 1u << (static_cast<std::uint32_t>(id) % 32);
}

// The end tokens: wherever the output may end; alone when nothing else can follow.
bool add_end_tokens(const Matcher& matcher, const TokenVocabulary& vocab, std::vector<std::uint32_t>& mask) {
  if (!matcher.accepting() && !matcher.dead()) return false;
  for (const std::int32_t id : vocab.end_tokens())
    if (static_cast<std::size_t>(id) / 32 < mask.size()) set(mask, id);
  // Dead (a bug or a token fed that the mask did not allow): end the output rather than
  // leave the sampler nothing to draw.
  return matcher.dead() || matcher.complete();
}

}  // namespace

void compute_token_mask(const Matcher& matcher, const TokenVocabulary& vocab, std::size_t words,
                        std::vector<std::uint32_t>& mask) {
  mask.assign(std::max(words, (static_cast<std::size_t>(vocab.size()) + 31) / 32), 0u);
  if (add_end_tokens(matcher, vocab, mask)) return;
  const std::vector<std::int32_t>& sorted = vocab.sorted();
  const std::vector<std::uint32_t>& lcp = vocab.shared_prefix();
  // states[d]: the matcher after the first d bytes of the current token; valid up to `valid`.
  std::vector<Matcher> states(1, matcher);
  // Inside a string value, a token of plain characters is allowed exactly when the string has
  // room for them: decided without the matcher (most of a large vocabulary, in that state).
  const std::int64_t room = matcher.string_room();
  const std::vector<std::int32_t>& plain = vocab.plain_chars();
  std::size_t valid = 0;
  // After a refusal at byte k of a token, every following token sharing its first k + 1 bytes
  // is refused too: `dead` is k + 1 while that holds, 0 otherwise.
  std::size_t dead = 0;
  // The prefix shared with the last token walked (the least common prefix since it).
  std::uint32_t run = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    run = i == 0 ? 0 : std::min(run, lcp[i]);
    const std::int32_t chars = plain[static_cast<std::size_t>(sorted[i])];
    if (room >= -1 && chars >= 0) {
      if (room == -1 || chars <= room) set(mask, sorted[i]);
      continue;
    }
    const std::string& t = vocab.bytes(sorted[i]);
    const std::size_t shared = run;
    run = std::numeric_limits<std::uint32_t>::max();
    if (dead > 0 && shared >= dead) continue;
    dead = 0;
    valid = std::min(valid, shared);
    if (states.size() < t.size() + 1) states.resize(t.size() + 1, matcher);
    bool ok = true;
    for (std::size_t d = valid; d < t.size(); ++d) {
      states[d + 1] = states[d];
      if (!states[d + 1].feed(static_cast<std::uint8_t>(t[d]))) {
        valid = d;
        dead = d + 1;
        ok = false;
        break;
      }
      valid = d + 1;
    }
    if (ok) set(mask, sorted[i]);
  }
}

void naive_token_mask(const Matcher& matcher, const TokenVocabulary& vocab, std::size_t words,
                      std::vector<std::uint32_t>& mask) {
  mask.assign(std::max(words, (static_cast<std::size_t>(vocab.size()) + 31) / 32), 0u);
  if (add_end_tokens(matcher, vocab, mask)) return;
  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.bytes(id).empty() || vocab.is_end(id)) continue;
    Matcher copy = matcher;
    if (copy.feed(vocab.bytes(id))) set(mask, id);
  }
}

}  // namespace sy::structured
