// `switchyard demo`: serves a short synthetic workload on the tiny demo model and prints the
// throughput. Creates the model on first use.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/model/random_model.h"
#include "engine/reference/reference_session.h"

namespace sy::cli {
namespace {

struct DemoArgs {
  std::filesystem::path model;
  std::int32_t requests = 8;
  std::int32_t max_new_tokens = 64;
  std::uint64_t seed = 0;
};

std::filesystem::path default_demo_model_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "switchyard" / "demo-mixtral-tiny";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".cache" / "switchyard" / "demo-mixtral-tiny";
  return std::filesystem::temp_directory_path() / "switchyard-demo-mixtral-tiny";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run(DemoArgs a) {
  if (a.model.empty()) a.model = default_demo_model_dir();
  if (!std::filesystem::exists(a.model / "config.json")) {
    std::filesystem::create_directories(a.model.parent_path());
    const ModelConfig config = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
    check(write_random_model(config, /*seed=*/0, a.model));
    std::printf("created the tiny demo model in %s\n", a.model.string().c_str());
  }
  auto weights = load_model(a.model);
  const ModelConfig& c = weights->config();
  std::printf("model %s: %s, %d layers, %d experts (top-%d), %.1f M parameters\n",
              a.model.string().c_str(), arch_name(c.arch).c_str(), c.num_layers, c.num_experts, c.top_k,
              static_cast<double>(c.parameter_count()) / 1e6);
  std::printf("workload: %d requests, prompts of 30-70 tokens, %d new tokens each, greedy, reference path\n\n",
              a.requests, a.max_new_tokens);
  std::printf("%8s %8s %8s %12s %12s\n", "request", "prompt", "output", "prefill t/s", "decode t/s");

  std::mt19937_64 rng(a.seed);
  std::uniform_int_distribution<std::int32_t> prompt_len(30, 70);
  std::uniform_int_distribution<std::int32_t> token(0, c.vocab_size - 1);
  ReferenceSession session(weights, 70 + a.max_new_tokens);
  double prefill_s = 0, decode_s = 0;
  std::int64_t prefill_tokens = 0, decode_tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::int32_t r = 0; r < a.requests; ++r) {
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(prompt_len(rng)));
    for (auto& t : prompt) t = token(rng);
    session.reset();
    auto t0 = std::chrono::steady_clock::now();
    auto logits = take(session.forward(prompt, /*all_logits=*/false));
    const double p_s = seconds_since(t0);
    kernels::Sampler sampler({}, a.seed);
    t0 = std::chrono::steady_clock::now();
    std::int32_t produced = 0;
    for (; produced < a.max_new_tokens; ++produced) {
      std::int32_t next = sampler.sample(logits.data(), c.vocab_size);
      if (produced + 1 < a.max_new_tokens) logits = take(session.forward({&next, 1}, false));
    }
    const double d_s = seconds_since(t0);
    prefill_s += p_s;
    decode_s += d_s;
    prefill_tokens += static_cast<std::int64_t>(prompt.size());
    decode_tokens += produced;
    std::printf("%8d %8zu %8d %12.0f %12.0f\n", r, prompt.size(), produced,
                static_cast<double>(prompt.size()) / p_s, produced / d_s);
  }
  const double total_s = seconds_since(start);
  std::printf("\nprefill %.0f tokens/s, decode %.0f tokens/s, %.0f generated tokens/s overall (%.2f s)\n",
              static_cast<double>(prefill_tokens) / prefill_s, static_cast<double>(decode_tokens) / decode_s,
              static_cast<double>(decode_tokens) / total_s, total_s);
}

}  // namespace

void register_demo(CLI::App& app) {
  auto args = std::make_shared<DemoArgs>();
  CLI::App* sub = app.add_subcommand("demo", "Serve a synthetic workload on the tiny demo model");
  sub->add_option("--model", args->model, "Model directory (default: the tiny demo model, created if missing)");
  sub->add_option("--requests", args->requests, "Requests to serve")->check(CLI::Range(1, 100000))
      ->capture_default_str();
  sub->add_option("--max-new-tokens", args->max_new_tokens, "Tokens generated per request")
      ->check(CLI::Range(1, 4096))->capture_default_str();
  sub->add_option("--seed", args->seed, "Workload seed")->capture_default_str();
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
