// Runs a fuzz target over every file of the directories (or files) named on the command line:
// the committed corpus and every crash ever found replay as an ordinary test, with any compiler.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace fs = std::filesystem;

namespace {

bool replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", file.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  std::size_t inputs = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg(argv[i]);
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::recursive_directory_iterator(arg, ec))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        if (!replay(f)) return 1;
        ++inputs;
      }
    } else if (fs::is_regular_file(arg, ec)) {
      if (!replay(arg)) return 1;
      ++inputs;
    } else {
      std::fprintf(stderr, "%s is neither a directory nor a file\n", argv[i]);
      return 1;
    }
  }
  if (inputs == 0) {
    std::fprintf(stderr, "no inputs found: an empty corpus tests nothing\n");
    return 1;
  }
  std::printf("replayed %zu inputs without a crash or a violated property\n", inputs);
  return 0;
}
