// Property failures of the fuzz targets: loud and fatal, so the input is kept.
#include "tests/fuzz/fuzz_target.h"

#include <cstdio>
#include <cstdlib>

void fuzz_fail(const char* target, const char* what) {
  std::fprintf(stderr, "fuzz target %s: property violated: %s\n", target, what);
  std::fflush(stderr);
  std::abort();
}
