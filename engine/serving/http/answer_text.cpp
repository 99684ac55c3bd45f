#include "engine/serving/http/answer_text.h"

namespace sy::http {

AnswerText::AnswerText(const text::Tokenizer* tokenizer, std::vector<std::string> stops) : stops_(std::move(stops)) {
  if (tokenizer) detok_.emplace(*tokenizer, /*skip_special_tokens=*/true);
}

std::string AnswerText::push(std::int32_t id) {
  if (!detok_) return {};
  return stops_.push(detok_->push(id));
}

std::string AnswerText::finish() {
  if (!detok_) return {};
  std::string out = stops_.push(detok_->finish());
  return out + stops_.finish();
}

}  // namespace sy::http
