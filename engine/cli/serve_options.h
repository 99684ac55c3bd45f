// The options `generate --layout` and `bench` share: layout, policy overrides, capacity.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/model/model_weights.h"
#include "engine/runtime/layout.h"
#include "engine/runtime/runtime_policy.h"
#include "engine/serving/deployment.h"

namespace sy::cli {

struct ServeOptions {
  std::filesystem::path layout;
  std::string policy;        // empty: the layout's
  std::string scheduler;     // empty: the layout's
  std::string barrier;       // empty: the layout's
  std::string gate;          // empty: the layout's
  std::int32_t microbatches = 0;  // 0: the layout's
  std::int32_t expert_chunks = 0;  // 0: the layout's
  std::string findep_config;       // "auto": FinDEP's solver chooses r1, r2 and the order
  std::optional<std::int32_t> lookahead;
  std::optional<double> decay;
  std::int64_t max_waiting_requests = CoordinatorOptions{}.max_waiting_requests;
  std::int64_t max_waiting_tokens = CoordinatorOptions{}.max_waiting_tokens;
  bool prefix_caching = false;
  // --max-num-batched-tokens (CoordinatorOptions::max_num_batched_tokens): 0, off, unless a
  // command sets its own default before add_to (serve: kServeMaxNumBatchedTokens).
  std::int32_t max_num_batched_tokens = 0;
  // vLLM's API server default (EngineArgs, OPENAI_API_SERVER usage context, GPUs other than
  // the ≥ 70 GiB ones, which get 8192).
  static constexpr std::int32_t kServeMaxNumBatchedTokens = 2048;

  // Adds --layout, --policy, --scheduler, --microbatches, --expert-chunks, --lookahead, --decay, the
  // admission queue's bounds, --prefix-caching and --max-num-batched-tokens to a command.
  void add_to(CLI::App& app, bool layout_required);
  // The layout file (refused with the loader's message), with the policy flags applied.
  Layout load(const ModelConfig& config) const;
  // The policy the flags and the layout say, as the runtime takes it.
  RuntimePolicy policy_for(const Layout& loaded, const std::string& policy_override = {}) const;
  // A deployment's options from the layout's capacity, that policy, and a routing skew
  // ("exp:λ", empty for the model's router) seeded with `seed`.
  DeploymentOptions deployment_options(const Layout& loaded, const std::string& policy_override = {},
                                       const std::string& skew = {}, std::uint64_t seed = 0) const;
  // --findep-config auto: options.policy (findep) gets the r1, r2 and order FinDEP's solver
  // chooses for `topology`, the batch limit per rank and `mean_context`, planned with `costs`.
  // Returns the line that reports the choice; empty without the flag or under another policy.
  std::string resolve_findep(DeploymentOptions& options, const FindepCostBasis& costs, const Topology& topology,
                             double mean_context) const;
};

}  // namespace sy::cli
