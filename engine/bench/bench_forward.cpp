// End-to-end CPU throughput of the forward path on the `small` preset: prefill tokens/s and
// decode tokens/s at batch 1 and batch 64, printed as one table. A benchmark, not a test.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/forward/forward_pass.h"
#include "engine/kv/kv_block_allocator.h"
#include "engine/kv/sequence_kv.h"
#include "engine/model/random_model.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/sampling.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  const char* phase;
  int batch;
  int tokens_per_seq;
  double tokens;
  double seconds;
};

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Forward-pass throughput on the small preset"};
  std::filesystem::path model_dir = "models/small-mixtral-bf16";
  std::string arch_name = "mixtral";
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  int prompt = 128, decode_steps = 16, prefill_len = 512;
  std::vector<int> batches = {1, 64};
  app.add_option("--model", model_dir, "Model directory (created from the small preset if missing)")->capture_default_str();
  app.add_option("--arch", arch_name, "Architecture when creating the model")->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--prompt", prompt, "Prompt length before decoding")->capture_default_str();
  app.add_option("--decode-steps", decode_steps)->capture_default_str();
  app.add_option("--prefill", prefill_len, "Tokens of the prefill measurement")->capture_default_str();
  app.add_option("--batches", batches, "Decode batch sizes")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  sy::kernels::set_num_threads(threads);

  if (!std::filesystem::exists(model_dir / "config.json")) {
    auto arch = sy::parse_arch(arch_name);
    if (!arch.ok()) return std::fprintf(stderr, "%s\n", arch.status().message().c_str()), 1;
    std::printf("creating %s ...\n", model_dir.string().c_str());
    std::filesystem::create_directories(model_dir.parent_path());
    auto config = sy::preset_config(*arch, sy::ModelPreset::Small, sy::kernels::DType::BF16);
    if (auto s = sy::write_random_model(config, 0, model_dir); !s.ok())
      return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
  }
  auto loaded = sy::ModelWeights::load(model_dir);
  if (!loaded.ok()) return std::fprintf(stderr, "%s\n", loaded.status().message().c_str()), 1;
  auto weights = *loaded;
  const sy::ModelConfig& c = weights->config();
  sy::ModelOps ops(weights);
  std::printf("model %s: %s, %.0f M parameters, %s weights, %d threads\n", model_dir.string().c_str(),
              sy::arch_name(c.arch).c_str(), static_cast<double>(c.parameter_count()) / 1e6,
              std::string(sy::kernels::dtype_name(c.dtype)).c_str(), threads);

  std::mt19937 rng(0);
  std::uniform_int_distribution<std::int32_t> token(0, c.vocab_size - 1);
  sy::Workspace ws;
  std::vector<float> hidden, logits;
  std::vector<Row> rows;

  {  // prefill: one sequence of prefill_len tokens
    sy::PagedKvCache cache(c, (prefill_len + 15) / 16, 16);
    sy::KvBlockAllocator pages(cache.num_pages(), 16);
    sy::SequenceKv kv;
    kv.reserve(pages, prefill_len);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(prefill_len));
    for (auto& t : tokens) t = token(rng);
    sy::BatchLayout batch;
    batch.add_sequence(prefill_len, 0, kv.block_table());
    logits.resize(static_cast<std::size_t>(c.vocab_size));
    auto t0 = Clock::now();
    sy::forward_pass(ops, batch, cache, tokens.data(), {prefill_len - 1}, logits.data(), ws, hidden);
    rows.push_back({"prefill", 1, prefill_len, static_cast<double>(prefill_len), since(t0)});
  }

  for (int b : batches) {  // decode: b sequences of `prompt` tokens, then decode_steps steps
    const int max_len = prompt + decode_steps;
    sy::PagedKvCache cache(c, b * ((max_len + 15) / 16), 16);
    sy::KvBlockAllocator pages(cache.num_pages(), 16);
    std::vector<sy::SequenceKv> seqs(static_cast<std::size_t>(b));
    std::vector<std::int32_t> next(static_cast<std::size_t>(b));
    logits.resize(static_cast<std::size_t>(b) * c.vocab_size);
    for (int s = 0; s < b; ++s) {
      seqs[s].reserve(pages, max_len);
      std::vector<std::int32_t> tokens(static_cast<std::size_t>(prompt));
      for (auto& t : tokens) t = token(rng);
      sy::BatchLayout batch;
      batch.add_sequence(prompt, 0, seqs[s].block_table());
      sy::forward_pass(ops, batch, cache, tokens.data(), {prompt - 1}, logits.data(), ws, hidden);
      seqs[s].length = prompt;
      next[s] = sy::kernels::argmax(logits.data(), c.vocab_size);
    }
    std::vector<std::int32_t> logit_rows(static_cast<std::size_t>(b));
    for (int s = 0; s < b; ++s) logit_rows[s] = s;
    auto t0 = Clock::now();
    for (int step = 0; step < decode_steps; ++step) {
      sy::BatchLayout batch;
      for (auto& kv : seqs) batch.add_sequence(1, kv.length, kv.block_table());
      sy::forward_pass(ops, batch, cache, next.data(), logit_rows, logits.data(), ws, hidden);
      for (int s = 0; s < b; ++s) {
        seqs[s].length += 1;
        next[s] = sy::kernels::argmax(logits.data() + static_cast<std::size_t>(s) * c.vocab_size, c.vocab_size);
      }
    }
    rows.push_back({"decode", b, decode_steps, static_cast<double>(b) * decode_steps, since(t0)});
  }

  std::printf("\n%-8s %6s %14s %10s %12s %12s\n", "phase", "batch", "tokens/seq", "seconds", "tokens/s", "ms/step");
  for (const Row& r : rows) {
    const double steps = r.phase[0] == 'p' ? 1.0 : r.tokens_per_seq;
    std::printf("%-8s %6d %14d %10.3f %12.1f %12.2f\n", r.phase, r.batch, r.tokens_per_seq, r.seconds,
                r.tokens / r.seconds, 1e3 * r.seconds / steps);
  }
  if (rows.size() >= 3) {
    std::printf("\ndecode batch %d vs batch %d: %.1fx tokens/s\n", rows.back().batch, rows[1].batch,
                (rows.back().tokens / rows.back().seconds) / (rows[1].tokens / rows[1].seconds));
  }
  return 0;
}
