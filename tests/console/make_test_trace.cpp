// Writes the console tests' synthetic trace: make_test_trace OUT.db [SECONDS]. The GUI tests and
// docs use it where no engine recording is at hand.
#include <cstdio>
#include <cstdlib>

#include "synthetic_trace.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s OUT.db [SECONDS]\n", argv[0]);
    return 2;
  }
  const int seconds = argc == 3 ? std::atoi(argv[2]) : 3;
  auto counts = sy::console::testing::write_synthetic_trace(argv[1], seconds > 0 ? seconds : 3);
  if (!counts.ok()) {
    std::fprintf(stderr, "make_test_trace: error: %s\n", counts.status().message().c_str());
    return 1;
  }
  std::printf("wrote %s: %zu spans\n", argv[1], counts->spans);
  return 0;
}
