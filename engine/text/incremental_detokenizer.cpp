// Incremental detokenisation (see incremental_detokenizer.h). The window keeps the ids of the
// last emitted piece as context so decoders that treat the first token specially (Metaspace,
// Strip) decode the new ids as they would in the whole sequence: the new text is
// decode(window + new) less decode(window). Text is held back while it ends in U+FFFD (an
// incomplete character) or in a run of byte tokens (ByteFallback decodes a run as a whole).
#include "engine/text/incremental_detokenizer.h"

#include "engine/text/tokenizer.h"

namespace sy::text {

namespace {

bool ends_with_replacement(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : tokenizer_(&tokenizer), skip_special_(skip_special_tokens) {}

std::string IncrementalDetokenizer::emit_from(const std::string& text) {
  // decode(window + new) starts with decode(window) for the decoders we support; should it not,
  // the common prefix is the safe part to drop.
  std::size_t common = 0;
  while (common < prefix_.size() && common < text.size() && prefix_[common] == text[common]) ++common;
  std::string out = text.substr(common);
  // The emitted piece becomes the context of the next one.
  ids_.erase(ids_.begin(), ids_.begin() + static_cast<std::ptrdiff_t>(prefix_index_));
  prefix_index_ = ids_.size();
  prefix_ = tokenizer_->decode(ids_, skip_special_);
  return out;
}

std::string IncrementalDetokenizer::push(std::int32_t id) {
  ids_.push_back(id);
  if (skip_special_ && tokenizer_->is_special(id)) return "";
  if (tokenizer_->extends_byte_run(id)) return "";
  std::string text = tokenizer_->decode(ids_, skip_special_);
  if (text.size() <= prefix_.size() || ends_with_replacement(text)) return "";
  return emit_from(text);
}

std::string IncrementalDetokenizer::finish() {
  std::string text = tokenizer_->decode(ids_, skip_special_);
  if (text.size() <= prefix_.size()) return "";
  std::string out = emit_from(text);
  ids_.clear();
  prefix_.clear();
  prefix_index_ = 0;
  return out;
}

}  // namespace sy::text
