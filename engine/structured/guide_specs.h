// The guide specs of the grammars guided requests asked for lately, so that requests with equal
// grammars (one JSON schema sent with every request, as tool calls and structured outputs are)
// share one GuideSpec, and so one MaskCache: their masks are computed once, not per request.
// Used from any thread (the HTTP server's handlers, a rank's loop).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>

#include "engine/structured/guide.h"

namespace sy::structured {

class GuideSpecs {
 public:
  // capacity grammars at most (least recently asked for go first), each with a MaskCache of
  // mask_bytes: at most about capacity × mask_bytes of masks in all.
  static constexpr std::size_t kDefaultCapacity = 16;
  static constexpr std::size_t kDefaultMaskBytes = 4u << 20;
  explicit GuideSpecs(std::shared_ptr<const TokenVocabulary> vocabulary, std::size_t capacity = kDefaultCapacity,
                      std::size_t mask_bytes = kDefaultMaskBytes);

  // The spec of a grammar equal to `grammar` over this vocabulary: one already made, else a new
  // one (with its own MaskCache) kept for the next request.
  std::shared_ptr<const GuideSpec> get(const std::shared_ptr<const Grammar>& grammar);

  const std::shared_ptr<const TokenVocabulary>& vocabulary() const { return vocabulary_; }
  std::size_t size() const;

 private:
  std::shared_ptr<const TokenVocabulary> vocabulary_;
  std::size_t capacity_;
  std::size_t mask_bytes_;
  mutable std::mutex mutex_;
  std::list<std::shared_ptr<const GuideSpec>> specs_;  // most recently asked for first
};

}  // namespace sy::structured
