// Guided decoding across processes (docs/wire-format.md, type 33 and SequenceOpen's grammar):
// rank 0 sends a process its model's guided vocabulary once, before the first guided request
// it opens there, and each guided request's compiled grammar with its SequenceOpen; the
// attention rank in that process builds the request's guide from the two and masks its draws.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/dist/wire_format.h"
#include "engine/structured/grammar.h"
#include "engine/structured/token_vocabulary.h"

namespace sy::dist {

// Each token id's bytes in an output (empty: never allowed) and the ids that end an output.
struct GuideVocabulary {
  std::vector<std::string> bytes;
  std::vector<std::int32_t> end_tokens;
  bool operator==(const GuideVocabulary&) const = default;

  static GuideVocabulary of(const structured::TokenVocabulary& v);
  std::shared_ptr<const structured::TokenVocabulary> build() const;
};

std::string encode(const GuideVocabulary& m);
// Refuses a truncated message, more ids than the wire carries, and end tokens beyond the ids.
Status decode(ByteReader& r, GuideVocabulary& m);

// A compiled grammar inside another message; the decoder refuses what Grammar::check refuses.
void put_grammar(ByteWriter& w, const structured::Grammar& g);
Status get_grammar(ByteReader& r, structured::Grammar& g);

}  // namespace sy::dist
