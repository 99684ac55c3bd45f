// The text of one answer as its tokens come: incremental detokenisation (special tokens
// skipped, never a broken UTF-8 sequence) and the request's stop strings. Without a tokenizer
// an answer has no text (token ids only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/serving/http/stop_strings.h"
#include "engine/text/tokenizer.h"

namespace sy::http {

class AnswerText {
 public:
  // `tokenizer` (may be null) must outlive this object.
  AnswerText(const text::Tokenizer* tokenizer, std::vector<std::string> stops);
  // The text to send after this token (possibly empty while characters or a possible stop
  // string are held back).
  std::string push(std::int32_t id);
  // At the end of the answer: what was held back.
  std::string finish();
  // A stop string matched: the answer ends here (finish_reason "stop").
  bool stopped() const { return stops_.stopped(); }

 private:
  std::optional<text::IncrementalDetokenizer> detok_;
  StopStrings stops_;
};

}  // namespace sy::http
