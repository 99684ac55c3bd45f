// Streams the text of generated ids one id at a time without ever emitting a broken UTF-8
// sequence; what it emits, joined, is decode() of all the ids pushed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sy::text {

class Tokenizer;

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);
  // The newly completed text ("" while an incomplete character or a run of byte tokens is held
  // back).
  std::string push(std::int32_t id);
  // Whatever is still held back (invalid bytes become U+FFFD as HF does). Call once, at the end.
  std::string finish();

 private:
  // Decodes ids_ and returns what follows prefix_ (ids_[0, prefix_index_) decode to prefix_).
  std::string emit_from(const std::string& text);

  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::vector<std::int32_t> ids_;  // a window: the ids of the last emitted text, then new ones
  std::string prefix_;             // decode() of ids_[0, prefix_index_)
  std::size_t prefix_index_ = 0;
};

}  // namespace sy::text
