#include "engine/cli/serve_options.h"

#include "engine/cli/cli_support.h"

namespace sy::cli {

void ServeOptions::add_to(CLI::App& app, bool layout_required) {
  auto* opt = app.add_option("--layout", layout, "Deployment layout (TOML, see layouts/README.md)");
  if (layout_required) opt->required();
  app.add_option("--policy", policy, "Execution policy (default: the layout's)")
      ->check(CLI::IsMember({"sync", "pingpong", "async"}));
  app.add_option("--scheduler", scheduler, "Async scheduler (default: the layout's)")
      ->check(CLI::IsMember({"defrag", "mtfs", "flfs"}));
  app.add_option("--microbatches", microbatches, "Pingpong micro-batches m (default: the layout's)")
      ->check(CLI::Range(1, 64));
  app.add_option("--lookahead", lookahead, "Defrag lookahead depth K")->check(CLI::Range(0, 1024));
  app.add_option("--decay", decay, "Defrag decay δ in (0, 1]");
}

Layout ServeOptions::load(const ModelConfig& config) const {
  Layout l = take(load_layout(layout, config));
  if (!policy.empty()) l.policy.policy = policy;
  if (!scheduler.empty()) l.policy.scheduler = scheduler;
  if (microbatches > 0) l.policy.microbatches = microbatches;
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
