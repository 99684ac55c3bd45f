#include "engine/util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace sy {
namespace {

std::string amount(double value, const std::string& unit) {
  char buf[64];
  if (unit == "B") {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (value >= 1024.0 && u < 4) {
      value /= 1024.0;
      ++u;
    }
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", value, units[u]);
    return buf;
  }
  std::snprintf(buf, sizeof buf, value == std::floor(value) ? "%.0f" : "%.1f", value);
  return unit.empty() ? std::string(buf) : std::string(buf) + " " + unit;
}

std::string duration(double seconds) {
  char buf[32];
  const auto s = static_cast<long long>(std::llround(seconds));
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  }
  return buf;
}

}  // namespace

Progress::Progress(std::string label, std::int64_t total, std::string unit, ProgressOptions options)
    : label_(std::move(label)), total_(total), unit_(std::move(unit)), options_(std::move(options)) {
  terminal_ = options_.terminal ? *options_.terminal : (options_.out && isatty(fileno(options_.out)) == 1);
  start_ns_ = now();
}

Progress::~Progress() { finish(); }

std::int64_t Progress::now() const {
  if (options_.clock_ns) return options_.clock_ns();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Progress::update(std::int64_t done) {
  done_ = done;
  if (finished_ || !options_.out) return;
  const std::int64_t t = now();
  if (t - start_ns_ < options_.quiet_ns) return;
  const std::int64_t every = terminal_ ? options_.redraw_ns : options_.line_ns;
  // Elsewhere the first line waits a whole interval too: short work leaves the log alone.
  if (last_shown_ns_ < 0 ? (!terminal_ && t - start_ns_ < every) : t - last_shown_ns_ < every) return;
  last_shown_ns_ = t;
  show(false);
}

std::string Progress::describe() const {
  const double elapsed = static_cast<double>(now() - start_ns_) * 1e-9;
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  std::string s = label_;
  char pct[16];
  if (total_ > 0) {
    std::snprintf(pct, sizeof pct, " %3.0f%%", 100.0 * static_cast<double>(done_) / static_cast<double>(total_));
    s += pct;
  }
  s += " " + (total_ > 0 && unit_ != "B" ? amount(static_cast<double>(done_), "") + "/" + amount(static_cast<double>(total_), unit_)
              : total_ > 0              ? amount(static_cast<double>(done_), unit_) + "/" + amount(static_cast<double>(total_), unit_)
                                        : amount(static_cast<double>(done_), unit_));
  if (finished_) return s + " in " + duration(elapsed);
  if (rate > 0) {
    s += " " + amount(unit_ == "B" ? rate : std::round(rate * 10) / 10, unit_) + "/s";
    if (total_ > done_) s += " ETA " + duration(static_cast<double>(total_ - done_) / rate);
  }
  return s;
}

void Progress::show(bool final) {
  std::string line = describe();
  if (terminal_) {
    if (total_ > 0) {
      constexpr int kWidth = 24;
      const double f = std::clamp(static_cast<double>(done_) / static_cast<double>(total_), 0.0, 1.0);
      const int filled = static_cast<int>(f * kWidth);
      const std::string bar = "[" + std::string(static_cast<std::size_t>(filled), '#') +
                              std::string(static_cast<std::size_t>(kWidth - filled), '.') + "]";
      const std::size_t at = label_.size();
      line = line.substr(0, at) + " " + bar + line.substr(at);
    }
    std::fprintf(options_.out, "\r%s\x1b[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(options_.out, "%s\n", line.c_str());
  }
  std::fflush(options_.out);
}

void Progress::note(const std::string& line, std::FILE* to) {
  if (!to) to = options_.out;
  if (!to) return;
  const bool bar = options_.out && terminal_ && last_shown_ns_ >= 0 && !finished_;
  if (bar) std::fputs("\r\x1b[K", options_.out);
  if (bar && to != options_.out) std::fflush(options_.out);
  std::fprintf(to, "%s\n", line.c_str());
  std::fflush(to);
  if (bar) show(false);
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (last_shown_ns_ >= 0 && options_.out) show(true);
}

}  // namespace sy
