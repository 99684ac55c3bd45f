// Human-readable times for the views: durations with a unit that fits ("1.25 ms"), and run-time
// positions ("12.345 678 s") that keep nanosecond precision visible when zoomed in.
#pragma once

#include <cstdint>
#include <string>

namespace sy::console {

std::string format_duration(std::int64_t ns);
std::string format_duration(double ns);
// A position on the run's time base, with as many digits as `resolution_ns` needs.
std::string format_time(std::int64_t ns, std::int64_t resolution_ns = 1'000'000);
// A count with a k/M/G suffix ("1.2M").
std::string format_count(double value);

}  // namespace sy::console
