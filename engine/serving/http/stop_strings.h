// Stop strings over streamed text, as vLLM applies them: the answer ends before the first
// occurrence of any of them (the stop string itself is not part of it), and while streaming,
// text that may be the start of a stop string is held back until the next piece says.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace sy::http {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);

  // Takes the next piece of text; returns what may be sent now. After a stop string matched,
  // stopped() holds and everything later is dropped.
  std::string push(std::string_view text);
  // At the end of the answer (no stop string matched): what was held back.
  std::string finish();

  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }  // the stop string that ended it

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace sy::http
