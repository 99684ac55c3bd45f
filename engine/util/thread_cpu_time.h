// The CPU time the calling thread has used: what a simulation cost when several run at once
// (their wall times overlap, and on a busy machine each one's wall time counts the others').
#pragma once

#include <time.h>

namespace sy {

inline double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace sy
