// `switchyard plan`: MegaScale-Infer's deployment plan search for a model on one or two device
// profiles, printing the best plans and, with --verify, the simulator's check of the first few.
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/cli/backend_options.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/number_validators.h"
#include "engine/plan/plan_search.h"
#include "engine/plan/plan_verify.h"

namespace sy::cli {
namespace {

struct PlanArgs {
  std::string model;
  std::string hardware = "h100";
  std::string expert_hardware;  // empty: same as --hardware
  double slo_ms = 0;
  std::int32_t top = 5;
  std::int32_t verify = 0;
  std::string length_class = "medium";
  std::int32_t devices_per_node = 8;
  std::int32_t max_microbatches = 4;
  std::int32_t max_devices = 64;
  double verify_window_s = 3;
  bool json = false;
};

void run(const PlanArgs& a) {
  BackendOptions bo;
  bo.backend = "sim";
  bo.hardware = a.hardware;
  const Backend backend = Backend::open(bo, a.model);
  PlanInputs in;
  in.config = backend.config();
  in.attention_hw = *backend.hardware();
  in.expert_hw = a.expert_hardware.empty() ? in.attention_hw : take(find_hardware_profile(a.expert_hardware));
  in.slo_ms = a.slo_ms;
  in.devices_per_node = a.devices_per_node;
  in.max_microbatches = a.max_microbatches;
  in.max_devices = a.max_devices;
  const LengthClass lengths = take(parse_length_class(a.length_class));
  set_plan_lengths(in, lengths);

  const PlanSearchResult result = search_plans(in, a.top);
  if (result.plans.empty()) {
    std::string why;
    for (const auto& [kind, n] : result.rejected) why += (why.empty() ? "" : ", ") + kind + " " + std::to_string(n);
    throw CommandError{"no feasible plan for " + backend.model_name() + " on " + in.attention_hw.name + "/" +
                       in.expert_hw.name + " (" + std::to_string(result.shapes) + " shapes rejected: " + why + ")"};
  }
  PlanVerifyOptions vo;
  vo.length_class = lengths;
  vo.window_s = a.verify_window_s;

  if (a.json) {
    nlohmann::json out = {{"model", backend.model_name()}, {"inputs", plan_inputs_to_json(in)},
                          {"shapes", result.shapes}, {"estimates", result.estimates}};
    out["rejected"] = result.rejected;
    out["plans"] = nlohmann::json::array();
    for (std::size_t i = 0; i < result.plans.size(); ++i) {
      nlohmann::json p = plan_to_json(result.plans[i]);
      if (static_cast<std::int32_t>(i) < a.verify) {
        const PlanVerifyResult v = take(verify_plan(in, result.plans[i], vo));
        p["verify"] = {{"simulated_tokens_per_s", v.simulated_tokens_per_s},
                       {"simulated_itl_ms", v.simulated_itl_ms},
                       {"error", v.error}};
      }
      out["plans"].push_back(std::move(p));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }

  char slo[64] = "";
  if (in.slo_ms > 0) std::snprintf(slo, sizeof slo, ", SLO %g ms per token", in.slo_ms);
  std::printf("%s: attention on %s (price %.2f), experts on %s (price %.2f); s = %.0f, KV reserved %.0f positions%s\n",
              backend.model_name().c_str(), in.attention_hw.name.c_str(), in.attention_hw.price,
              in.expert_hw.name.c_str(), in.expert_hw.price, in.seq_len, in.kv_len, slo);
  std::printf("%lld shapes, %lld estimates; best %zu by tokens/s per price:\n\n",
              static_cast<long long>(result.shapes), static_cast<long long>(result.estimates), result.plans.size());
  std::printf("%3s %9s %9s %2s %5s %6s %5s %10s %9s %10s %9s %9s  %s\n", "#", "attn", "expert", "m", "b_a", "batch",
              "GPUs", "tokens/s", "ms/token", "tok/s/$", "attn GiB", "exp GiB", "binding");
  for (std::size_t i = 0; i < result.plans.size(); ++i) {
    const Plan& p = result.plans[i];
    const PlanShape& s = p.shape;
    const PlanEstimate& e = p.estimate;
    char attn[32], expert[32];
    std::snprintf(attn, sizeof attn, "%dx tp%d", s.n_a, s.tp_a);
    std::snprintf(expert, sizeof expert, "%dx tp%d", s.n_e, s.tp_e);
    std::printf("%3zu %9s %9s %2d %5d %6lld %5d %10.0f %9.2f %10.0f %9.1f %9.1f  %s\n", i + 1, attn, expert, s.m, s.b_a,
                static_cast<long long>(e.batch), e.devices, e.tokens_per_s, e.t_total, e.tokens_per_s_per_price,
                e.attention_mem_gib, e.expert_mem_gib, p.binding.c_str());
  }
  std::printf("\nattn/expert: nodes x tensor-parallel GPUs per node; m micro-batches of b_a sequences per attention "
              "node; ms/token: Eq. 5 step time.\n");
  if (a.verify <= 0) return;
  std::printf("\nverify: the simulator serving each plan (decode, %s lengths, uniform routing)\n\n",
              a.length_class.c_str());
  std::printf("%3s %12s %12s %8s %11s %11s %9s\n", "#", "predicted", "simulated", "error", "pred ms/tok",
              "sim ITL ms", "wall s");
  for (std::int32_t i = 0; i < a.verify && i < static_cast<std::int32_t>(result.plans.size()); ++i) {
    const PlanVerifyResult v = take(verify_plan(in, result.plans[static_cast<std::size_t>(i)], vo));
    std::printf("%3d %12.0f %12.0f %+7.1f%% %11.2f %11.2f %9.1f\n", i + 1, v.predicted_tokens_per_s,
                v.simulated_tokens_per_s, 100 * v.error, v.predicted_latency_ms, v.simulated_itl_ms, v.wall_s);
  }
}

}  // namespace

void register_plan(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* sub = app.add_subcommand(
      "plan", "Search MegaScale-Infer deployment plans (attention/expert nodes, micro-batches, batch) for a model");
  sub->add_option("--model", args->model, "A model directory, a config.json, or a name from assets/models")->required();
  sub->add_option("--hardware", args->hardware, "Attention GPUs' profile (and the experts' without --expert-hardware)")
      ->capture_default_str();
  sub->add_option("--expert-hardware", args->expert_hardware, "Expert GPUs' profile (heterogeneous deployment)");
  sub->add_option("--slo-ms", args->slo_ms, "Per-token latency bound in ms (0: none)")
      ->check(non_negative_number())->capture_default_str();
  sub->add_option("--top", args->top, "Plans to print")->check(CLI::Range(1, 1000))->capture_default_str();
  sub->add_option("--verify", args->verify, "Run the simulator on the first K plans and print the prediction error")
      ->check(CLI::Range(0, 1000))->capture_default_str();
  sub->add_option("--lengths", args->length_class, "Workload length class: short, medium or reasonable")
      ->check(CLI::IsMember({"short", "medium", "reasonable"}))->capture_default_str();
  sub->add_option("--devices-per-node", args->devices_per_node, "GPUs per node: the largest tensor-parallel group")
      ->check(CLI::Range(1, 64))->capture_default_str();
  sub->add_option("--max-microbatches", args->max_microbatches, "N_m: micro-batch counts tried are 1..N_m")
      ->check(CLI::Range(1, 16))->capture_default_str();
  sub->add_option("--max-devices", args->max_devices, "GPUs one plan may use")
      ->check(CLI::Range(2, 4096))->capture_default_str();
  sub->add_option("--verify-window", args->verify_window_s, "Cluster seconds each verify run measures")
      ->check(positive_number())->capture_default_str();
  sub->add_flag("--json", args->json, "One JSON object: inputs, rejected shapes, plans (with verify results)");
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
