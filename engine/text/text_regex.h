// A compiled PCRE2 regular expression (UTF + Unicode properties, JIT where available) with the
// match iteration of the Rust regex engines Hugging Face tokenizers uses.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace sy::text {

using Span = std::pair<std::size_t, std::size_t>;  // [begin, end) byte offsets

class TextRegex {
 public:
  // The JIT's stack for a match that overflows PCRE2's default 32 KiB (a repeated group such as
  // (?:a|b)+ takes some per repetition): mapped only when a match needs it.
  static constexpr std::size_t kMaxJitStack = std::size_t{64} << 20;

  // `what` names the pattern's owner in the error ("Split pre-tokenizer in tokenizer.json").
  static StatusOr<TextRegex> compile(std::string_view pattern, const std::string& what);

  // Non-overlapping matches left to right, appended to `out`. As Rust's find_iter: an empty
  // match right where the previous match ended is skipped. `text` must be valid UTF-8. An error
  // where PCRE2 gives up on a match (its match limit, or a JIT stack beyond kMaxJitStack):
  // `out` then holds the matches before that point only.
  Status find_all(std::string_view text, std::vector<Span>& out) const;
  // Whether the pattern matches anywhere in `text`.
  bool search(std::string_view text) const;

 private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

// Every non-overlapping occurrence of a literal (none for an empty needle).
void find_literal(std::string_view text, std::string_view needle, std::vector<Span>& out);

}  // namespace sy::text
