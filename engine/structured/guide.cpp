// A guided sequence's constraint (guide.h).
#include "engine/structured/guide.h"

#include <algorithm>

#include "engine/structured/token_mask.h"

namespace sy::structured {

Guide::Guide(const GuideSpec& spec)
    : spec_(spec), words_((static_cast<std::size_t>(spec.vocabulary->size()) + 31) / 32), matcher_(spec.grammar) {
  update_mask();
}

void Guide::update_mask() {
  if (finished_) {
    auto ends = std::make_shared<TokenMask>(words_, 0u);
    for (const std::int32_t id : spec_.vocabulary->end_tokens())
      if (static_cast<std::size_t>(id) / 32 < words_) (*ends)[static_cast<std::size_t>(id) / 32] |= 1u << (id % 32);
    mask_ = std::move(ends);
    return;
  }
  if (spec_.masks) {
    mask_ = spec_.masks->mask(matcher_, *spec_.vocabulary, words_);
    return;
  }
  auto fresh = std::make_shared<TokenMask>();
  compute_token_mask(matcher_, *spec_.vocabulary, words_, *fresh);
  mask_ = std::move(fresh);
}

void Guide::advance(std::int32_t token) {
  const TokenVocabulary& v = *spec_.vocabulary;
  if (finished_ || token < 0 || token >= v.size() || v.is_end(token) || v.bytes(token).empty()) {
    finished_ = true;
  } else {
    Matcher next = matcher_;
    if (next.feed(v.bytes(token))) matcher_ = std::move(next);
    else finished_ = true;
  }
  update_mask();
}

}  // namespace sy::structured
