#include "console/model/time_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sy::console {

std::string format_duration(double ns) {
  const double a = std::fabs(ns);
  char buf[48];
  if (a < 1e3)
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  else if (a < 1e6)
    std::snprintf(buf, sizeof buf, "%.3g us", ns / 1e3);
  else if (a < 1e9)
    std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  else if (a < 60e9)
    std::snprintf(buf, sizeof buf, "%.3g s", ns / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%dm %02ds", static_cast<int>(ns / 60e9),
                  static_cast<int>(std::fmod(ns / 1e9, 60.0)));
  return buf;
}

std::string format_duration(std::int64_t ns) { return format_duration(static_cast<double>(ns)); }

std::string format_time(std::int64_t ns, std::int64_t resolution_ns) {
  int decimals = 0;
  for (std::int64_t r = 1'000'000'000; r > std::max<std::int64_t>(resolution_ns, 1) && decimals < 9; r /= 10)
    ++decimals;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f s", decimals, static_cast<double>(ns) / 1e9);
  return buf;
}

std::string format_count(double value) {
  const double a = std::fabs(value);
  char buf[32];
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3gG", value / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3gM", value / 1e6);
  else if (a >= 1e4)
    std::snprintf(buf, sizeof buf, "%.3gk", value / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.4g", value);
  return buf;
}

}  // namespace sy::console
