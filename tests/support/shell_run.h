// Runs a shell command for a test and keeps what it printed, its exit code and how long it took.
#pragma once

#include <string>

namespace sy::test {

struct ShellRun {
  int exit_code = -1;   // -1 when it did not exit normally (or could not start)
  std::string output;   // stdout and stderr, interleaved as written
  double seconds = 0;
};

ShellRun shell(const std::string& command);

}  // namespace sy::test
