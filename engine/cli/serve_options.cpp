#include "engine/cli/serve_options.h"

#include <algorithm>
#include <cstdio>

#include "engine/cli/cli_support.h"
#include "engine/runtime/layout_parser.h"
#include "engine/sim/skew_router.h"
#include "engine/util/assets.h"

namespace sy::cli {

void ServeOptions::add_to(CLI::App& app, bool layout_required) {
  auto* opt = app.add_option("--layout", layout,
                             "Deployment layout: a TOML file (layouts/README.md), the name of a shipped one, colocated:N or disaggregated:A+E");
  if (layout_required) opt->required();
  app.add_option("--policy", policy, "Execution policy (default: the layout's)")
      ->check(CLI::IsMember({"sync", "pingpong", "async", "findep", "adaptive"}));
  app.add_option("--barrier", barrier,
                 "sync: 'collective' (per-block all-to-all latency and host scheduling per iteration, priced by "
                 "the sim) or 'ideal' (a free barrier); default: the layout's")
      ->check(CLI::IsMember({"collective", "ideal"}));
  app.add_option("--gate", gate,
                 "async: 'cost' (expert μ-queues wait for the cost model's minimum batch, at most its maximum "
                 "wait) or 'off'; default: the layout's")
      ->check(CLI::IsMember({"cost", "off"}));
  app.add_option("--scheduler", scheduler, "Async scheduler (default: the layout's)")
      ->check(CLI::IsMember({"defrag", "mtfs", "flfs", "tail"}));
  app.add_option("--microbatches", microbatches, "Pingpong micro-batches m, findep's r1 (default: the layout's)")
      ->check(CLI::Range(1, 64));
  app.add_option("--expert-chunks", expert_chunks,
                 "findep: chunks r2 of each micro-batch's expert step (default: the layout's)")
      ->check(CLI::Range(1, 64));
  app.add_option("--findep-config", findep_config,
                 "findep: 'auto' lets FinDEP's solver choose r1, r2 and the shared-expert order for this deployment")
      ->check(CLI::IsMember({"auto"}));
  app.add_option("--lookahead", lookahead, "Defrag lookahead depth K")->check(CLI::Range(0, 1024));
  app.add_option("--decay", decay, "Defrag decay δ in (0, 1]");
  app.add_option("--max-waiting-requests", max_waiting_requests,
                 "Requests that may wait for admission; one more is rejected at once (1..16777216)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 24))->capture_default_str();
  app.add_option("--max-waiting-tokens", max_waiting_tokens,
                 "Prompt tokens that may wait for admission; a request beyond is rejected at once (1..2^32)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 32))->capture_default_str();
  app.add_flag("--prefix-caching", prefix_caching,
               "Share the KV pages of prompts' common leading tokens between requests on an attention rank "
               "(automatic prefix caching)");
  app.add_option("--max-num-batched-tokens", max_num_batched_tokens,
                 "Chunked prefill: rows one pass of an attention rank feeds its first block, decodes first, then "
                 "prompts cut to what is left (vLLM's max_num_batched_tokens); 0: off, whole prompts (0..16777216)")
      ->check(CLI::Range(0, 1 << 24))->capture_default_str();
}

namespace {
// "colocated:N" or "disaggregated:A+E": a generated layout, for clusters no file describes.
std::optional<Layout> generated_layout(const std::string& spec, const ModelConfig& config) {
  const auto number = [&](const std::string& text) {
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != text.size() || n <= 0 || n > 4096)
      throw CommandError{"layout '" + spec + "': '" + text + "' is not a device count in 1..4096"};
    return static_cast<std::int32_t>(n);
  };
  if (spec.rfind("colocated:", 0) == 0) return make_colocated_layout(number(spec.substr(10)), config);
  if (spec.rfind("disaggregated:", 0) == 0) {
    const std::string rest = spec.substr(14);
    const auto plus = rest.find('+');
    if (plus == std::string::npos)
      throw CommandError{"layout '" + spec + "': expected disaggregated:A+E (attention + expert devices)"};
    return make_disaggregated_layout(number(rest.substr(0, plus)), number(rest.substr(plus + 1)), config);
  }
  return std::nullopt;
}
}  // namespace

namespace {
// A bare name that is no file here (e.g. "mixtral-8x7b-8xh100") is one of the shipped layouts.
std::filesystem::path shipped_layout(const std::filesystem::path& layout) {
  std::error_code ec;
  if (std::filesystem::exists(layout, ec) || layout.has_parent_path()) return layout;
  for (const std::string& name : {layout.string(), layout.string() + ".toml"}) {
    const std::filesystem::path candidate = layouts_dir() / name;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  return layout;
}
}  // namespace

Layout ServeOptions::load(const ModelConfig& config) const {
  std::optional<Layout> generated = generated_layout(layout.string(), config);
  // A generated layout meets the rules a file does (e.g. disaggregated:1+9 for 8 experts would
  // leave an expert device with nothing to hold).
  if (generated)
    if (Status s = validate_layout(*generated, config); !s.ok())
      throw CommandError{"layout '" + layout.string() + "': " + s.message()};
  Layout l = generated ? *generated : take(load_layout(shipped_layout(layout), config));
  if (!policy.empty()) l.policy.policy = policy;
  if (!scheduler.empty()) l.policy.scheduler = scheduler;
  if (!barrier.empty()) l.policy.barrier = barrier;
  if (!gate.empty()) l.policy.gate = gate;
  if (microbatches > 0) l.policy.microbatches = microbatches;
  if (expert_chunks > 0) l.policy.expert_chunks = expert_chunks;
  if (lookahead) l.policy.lookahead = *lookahead;
  if (decay) l.policy.decay = *decay;
  check(validate_policy(l.policy).with_context("policy flags"));
  return l;
}

RuntimePolicy ServeOptions::policy_for(const Layout& loaded, const std::string& policy_override) const {
  PolicySpec spec = loaded.policy;
  if (!policy_override.empty()) spec.policy = policy_override;
  return take(runtime_policy(spec));
}

}  // namespace sy::cli

namespace sy::cli {

DeploymentOptions ServeOptions::deployment_options(const Layout& loaded, const std::string& policy_override,
                                                   const std::string& skew, std::uint64_t seed) const {
  DeploymentOptions options;
  options.policy = policy_for(loaded, policy_override);
  options.kv_pages_per_rank = loaded.capacity.kv_pages_per_rank;
  options.page_size = loaded.capacity.page_size;
  options.coordinator.max_batch_per_rank = loaded.capacity.max_batch;
  options.coordinator.max_waiting_requests = max_waiting_requests;
  options.coordinator.max_waiting_tokens = max_waiting_tokens;
  options.coordinator.prefix_caching = prefix_caching;
  options.coordinator.max_num_batched_tokens = max_num_batched_tokens;
  if (!skew.empty()) {
    options.skew_lambda = take(parse_skew(skew));
    options.skew_seed = seed;
  }
  return options;
}

std::string ServeOptions::resolve_findep(DeploymentOptions& options, const FindepCostBasis& costs,
                                         const Topology& topology, double mean_context) const {
  if (findep_config != "auto") return {};
  if (options.policy.kind != PolicyKind::FinDep)
    throw CommandError{"--findep-config auto configures findep: the policy is " + policy_name(options.policy.kind)};
  if (microbatches > 0 || expert_chunks > 0)
    throw CommandError{"--findep-config auto chooses r1 and r2: leave out --microbatches and --expert-chunks"};
  const std::int64_t batch = options.coordinator.max_batch_per_rank;
  const FindepSolution s = take(solve_findep_for(costs, topology, batch, mean_context));
  options.policy = take(runtime_policy(findep_policy_spec(policy_spec(options.policy), s)));
  char at[96];
  std::snprintf(at, sizeof at, " for %lld per rank at a mean context of %.0f", static_cast<long long>(batch),
                std::max(1.0, mean_context));
  return describe_findep_choice(s, costs) + at;
}

}  // namespace sy::cli
