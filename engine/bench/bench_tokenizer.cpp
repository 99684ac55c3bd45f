// Tokenizer throughput: encode of a multilingual text (the golden texts of
// tests/golden/data/tokenizers: many scripts, emoji, code, whitespace runs, special tokens) as
// one document and prompt by prompt, with a cold word cache and a warm one; decode and
// incremental detokenisation. Prints tokens/s and the ratios between the cases. The same text
// through Hugging Face tokenizers: tools/tokenizers/bench_hf_tokenizers.py. A benchmark, not a
// test.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "engine/text/tokenizer.h"

namespace {

using namespace sy;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Calls `body` (which returns the tokens it handled) until `seconds` have passed; tokens/s.
double rate(double seconds, const std::function<std::size_t()>& body) {
  const auto start = Clock::now();
  std::size_t tokens = 0;
  double elapsed = 0;
  do {
    tokens += body();
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return static_cast<double>(tokens) / elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokenizer encode/decode throughput"};
  std::string source_dir = SY_SOURCE_DIR;
  std::vector<std::string> names = {"qwen2-large", "llama-large"};
  double seconds = 1.0;
  int repeat = 20;
  app.add_option("--tokenizers", names, "Golden tokenizers (tests/golden/data/tokenizers/NAME)")->capture_default_str();
  app.add_option("--seconds", seconds, "Time per measurement")->capture_default_str();
  app.add_option("--repeat", repeat, "Copies of the golden texts in the document")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const fs::path goldens = fs::path(source_dir) / "tests" / "golden" / "data" / "tokenizers";
  std::printf("%-12s %10s %8s | %14s %14s %14s %14s | %12s %12s\n", "tokenizer", "doc bytes", "tokens",
              "doc cold tok/s", "doc warm tok/s", "prompts tok/s", "cold/warm", "decode tok/s", "stream tok/s");
  for (const std::string& name : names) {
    const auto golden = nlohmann::json::parse(slurp(goldens / name / "golden.json"));
    const fs::path dir = fs::path(source_dir) / golden["tokenizer_dir"].get<std::string>();
    const std::string tokenizer_json = slurp(dir / "tokenizer.json");
    const std::string config_json = slurp(goldens / name / "tokenizer_config.json");
    auto fresh = [&]() -> text::Tokenizer { return text::Tokenizer::from_json(tokenizer_json, config_json, name).value(); };

    // The document: every golden text, `repeat` times, each copy numbered so copies differ.
    std::vector<std::string> prompts;
    for (int r = 0; r < repeat; ++r)
      for (const auto& c : golden["cases"]) prompts.push_back("#" + std::to_string(r) + " " + c["text"].get<std::string>());
    std::string document;
    for (const auto& p : prompts) document += p + "\n";

    const text::Tokenizer warm = fresh();
    const auto ids = warm.encode(document, false);
    // Cold: a new tokenizer (empty word cache) for every encode; its load is not timed.
    double cold_seconds = 0;
    std::size_t cold_tokens = 0;
    while (cold_seconds < seconds) {
      const text::Tokenizer t = fresh();
      const auto start = Clock::now();
      cold_tokens += t.encode(document, false).size();
      cold_seconds += std::chrono::duration<double>(Clock::now() - start).count();
    }
    const double cold = static_cast<double>(cold_tokens) / cold_seconds;
    const double doc = rate(seconds, [&] { return warm.encode(document, false).size(); });
    const double per_prompt = rate(seconds, [&] {
      std::size_t n = 0;
      for (const auto& p : prompts) n += warm.encode(p, true).size();
      return n;
    });
    const double decode = rate(seconds, [&] { return warm.decode(ids, false).size() ? ids.size() : 0; });
    const double stream = rate(seconds, [&] {
      text::IncrementalDetokenizer d(warm, false);
      std::size_t bytes = 0;
      for (auto id : ids) bytes += d.push(id).size();
      bytes += d.finish().size();
      return bytes ? ids.size() : 0;
    });
    std::printf("%-12s %10zu %8zu | %14.0f %14.0f %14.0f %14.2f | %12.0f %12.0f\n", name.c_str(), document.size(),
                ids.size(), cold, doc, per_prompt, cold / doc, decode, stream);
  }
  return 0;
}
