// One guided sequence's constraint (vLLM's structured outputs): the grammar's matcher fed the
// tokens sampled so far and the mask of the tokens allowed next. Lives with the sequence on its
// attention rank (KvBlockManager) and is advanced as each sampled token is appended.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/structured/grammar.h"
#include "engine/structured/mask_cache.h"
#include "engine/structured/matcher.h"
#include "engine/structured/token_vocabulary.h"

namespace sy::structured {

// What a request asks for: the grammar, and the vocabulary it is matched against (shared by
// every request of the model).
struct GuideSpec {
  std::shared_ptr<const Grammar> grammar;
  std::shared_ptr<const TokenVocabulary> vocabulary;
  // The masks of this grammar's states over this vocabulary, shared by the guides made from
  // this spec (and from equal ones: GuideSpecs); null computes every mask.
  std::shared_ptr<MaskCache> masks{};
};

class Guide {
 public:
  // The mask covers the vocabulary's ids; a model's ids beyond them are never allowed.
  explicit Guide(const GuideSpec& spec);

  // The tokens allowed next, a bit per id (token_mask.h).
  std::span<const std::uint32_t> mask() const { return *mask_; }
  // The sampled token: fed to the matcher and the next mask computed. An end token (or a token
  // the mask did not allow, which is our bug) leaves only the end tokens allowed.
  void advance(std::int32_t token);
  bool finished() const { return finished_; }

 private:
  void update_mask();

  GuideSpec spec_;
  std::size_t words_;
  Matcher matcher_;
  bool finished_ = false;
  std::shared_ptr<const TokenMask> mask_;
};

}  // namespace sy::structured
