// Progress of long work (model creation and loading, reproduce, calibrate) on stderr: a bar
// with count, rate and ETA redrawn in place on a terminal; elsewhere (CI logs, files) one plain
// line every few seconds at most. Work that ends quickly shows nothing. The work loop calls
// update(); no thread of its own.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>

namespace sy {

struct ProgressOptions {
  std::FILE* out = stderr;
  std::optional<bool> terminal;             // unset: whether `out` is a terminal
  std::function<std::int64_t()> clock_ns;   // unset: the steady clock (tests pass their own)
  std::int64_t quiet_ns = 500'000'000;      // nothing is shown before this much time has gone
  std::int64_t redraw_ns = 100'000'000;     // a terminal's bar is redrawn at most this often
  std::int64_t line_ns = 5'000'000'000;     // elsewhere: at most one line this often
};

class Progress {
 public:
  // total ≤ 0: unknown (no bar, no ETA). unit "B" is shown as KiB/MiB/GiB; any other is
  // written after the count ("rows", "tensors").
  Progress(std::string label, std::int64_t total, std::string unit, ProgressOptions options = {});
  ~Progress();  // finish()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(std::int64_t done);  // how much is done so far
  void add(std::int64_t n = 1) { update(done_ + n); }
  std::int64_t done() const { return done_; }
  void set_total(std::int64_t total) { total_ = total; }  // once it is known
  // The last state, then a newline, when anything was shown (a line saying how long it took).
  void finish();
  // Writes `line` (and a newline) to `to` (null: the progress's own output, e.g. stdout for a
  // table printed as the work goes) with the bar kept below it.
  void note(const std::string& line, std::FILE* to = nullptr);
  // The text of the current state, without control characters: "label  45% 9/20 rows 3.1 rows/s ETA 4s".
  std::string describe() const;

 private:
  std::int64_t now() const;
  void show(bool final);

  std::string label_;
  std::int64_t total_;
  std::string unit_;
  ProgressOptions options_;
  bool terminal_ = false;
  std::int64_t start_ns_ = 0;
  std::int64_t last_shown_ns_ = -1;  // -1: nothing shown yet
  std::int64_t done_ = 0;
  bool finished_ = false;
};

}  // namespace sy
