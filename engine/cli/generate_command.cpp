// `switchyard generate`: continues a prompt through the reference path, prints the new ids.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/cli/backend_options.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/live_telemetry.h"
#include "engine/cli/number_validators.h"
#include "engine/cli/serve_options.h"
#include "engine/reference/reference_session.h"
#include "engine/cpu/cpu_deployment.h"
#include "engine/dist/distributed_run.h"
#include "engine/runtime/layout_parser.h"
#include "engine/serving/memory_budget.h"
#include "engine/serving/workload.h"

namespace sy::cli {
namespace {

struct GenerateArgs {
  std::filesystem::path model;
  std::string tokens;
  std::int32_t max_new_tokens = 16;
  float temperature = 0.0f;
  float top_p = 1.0f;
  std::int32_t top_k = 0;
  float min_p = 0.0f;
  kernels::Penalties penalties;
  std::uint64_t seed = 0;
  bool ignore_eos = false;
  std::filesystem::path prompts;
  std::filesystem::path out;
  ServeOptions serve;
  TelemetryFlags live;
  std::string clock = "wall";
  std::string backend = "cpu";  // with --prompts: cpu or cuda
  int gpu = 0;
  std::string cuda_graphs = "on";  // with --backend cuda: decode attention as CUDA graphs
  std::string switch_policy;       // with --prompts: switch to this policy mid-run
  std::filesystem::path switch_placement;  // and/or to this layout's expert placement
  std::int64_t switch_after = 1;   // after this many tokens
};

// --switch-policy / --switch-placement: asks for another policy and/or expert placement once
// `after` tokens have been sampled, so a live change happens mid-run at a point that does not
// depend on timing.
class ChangeAt final : public RequestObserver {
 public:
  ChangeAt(Coordinator& coordinator, std::optional<RuntimePolicy> policy, std::optional<Placement> placement,
           std::int64_t after)
      : coordinator_(coordinator), policy_(std::move(policy)), placement_(std::move(placement)), after_(after) {}
  void on_request(const RequestUpdate& update) override {
    if (update.phase != RequestPhase::Token || fired_ || ++tokens_ < after_) return;
    fired_ = true;
    if (placement_)
      check(coordinator_.request_placement(*placement_, [](std::int64_t at) {
        std::fprintf(stderr, "switched placement at %.3f ms\n", static_cast<double>(at) / 1e6);
      }));
    if (policy_)
      check(coordinator_.request_policy(*policy_, [policy = policy_->describe()](std::int64_t at) {
        std::fprintf(stderr, "switched to policy %s at %.3f ms\n", policy.c_str(), static_cast<double>(at) / 1e6);
      }));
  }

 private:
  Coordinator& coordinator_;
  std::optional<RuntimePolicy> policy_;
  std::optional<Placement> placement_;
  std::int64_t after_;
  std::int64_t tokens_ = 0;
  bool fired_ = false;
};

// The expert placement of another layout file for the same devices (--switch-placement).
Placement placement_of(const std::filesystem::path& file, const Layout& running, const ModelConfig& config) {
  const Layout other = take(load_layout(file, config));
  if (other.num_devices() != running.num_devices())
    throw CommandError{"--switch-placement " + file.string() + ": " + std::to_string(other.num_devices()) +
                       " devices, the running layout has " + std::to_string(running.num_devices())};
  for (std::int32_t d = 0; d < running.num_devices(); ++d) {
    const DeviceSpec& a = other.devices[static_cast<std::size_t>(d)];
    const DeviceSpec& b = running.devices[static_cast<std::size_t>(d)];
    if (a.name != b.name || a.attention != b.attention)
      throw CommandError{"--switch-placement " + file.string() + ": device " + std::to_string(d) + " is '" + a.name +
                         "'" + (a.attention ? " with attention" : "") + ", the running layout's is '" + b.name + "'" +
                         (b.attention ? " with attention" : "")};
  }
  return other.placement;
}

// Many requests at once through the expert-parallel runtime on cpu devices.
void run_many(const GenerateArgs& a) {
  auto weights = load_model(a.model);
  const ModelConfig& c = weights->config();
  const Layout layout = a.serve.load(c);
  DeploymentOptions options = a.serve.deployment_options(layout);
  options.clock = a.clock == "virtual" ? Clock::Virtual : Clock::Wall;
  options.coordinator.sampling = {a.temperature, a.top_p, a.top_k, a.min_p};
  options.coordinator.penalties = a.penalties;
  options.coordinator.seed = a.seed;
  if (!a.ignore_eos) options.coordinator.eos_token_id = c.eos_token_id;
  Topology topology = Topology::from_layout(layout, c);
  // Under a launcher (mpirun, srun, RANK/WORLD_SIZE) this process is one rank of the deployment.
  const dist::RankEnvironment env = take(dist::RankEnvironment::from_process());
  if (env.distributed() && options.clock != Clock::Wall)
    throw CommandError{"--clock virtual runs in one process; ranks started by " + env.launcher + " need --clock wall"};
  const std::string identity = "generate backend=" + a.backend + " clock=" + a.clock + " switch=" + a.switch_policy + "," +
                               a.switch_placement.string() + "@" + std::to_string(a.switch_after) +
                               " seed=" + std::to_string(a.seed);
  std::unique_ptr<dist::DistributedRun> ranks =
      take(dist::DistributedRun::join(env, layout, a.model, identity, topology,
                                      a.backend == "cuda" ? cuda_device_links(layout, topology, env, a.gpu) : nullptr));
  if (ranks) {
    ranks->configure(options, static_cast<std::int64_t>(c.hidden_size) * 4);
    std::fprintf(stderr, "%s\n", ranks->describe(topology).c_str());
  }
  const bool cuda = a.backend == "cuda";
  if (cuda && options.clock != Clock::Wall) throw CommandError{"--backend cuda runs on the wall clock"};
  check(check_host_memory(c, topology, options.kv_pages_per_rank, options.page_size, /*host_kv=*/!cuda));
  std::unique_ptr<Deployment> made = cuda ? deploy_cuda(weights, topology, options, a.gpu, a.cuda_graphs == "on")
                                          : std::make_unique<CpuDeployment>(weights, topology, options);
  Deployment& deployment = *made;
  // However this returns, the other ranks' messages stop reaching the loop before it goes.
  struct Detach {
    dist::DistributedRun* run;
    ~Detach() {
      if (run) run->detach();
    }
  } detach{ranks.get()};
  if (ranks) ranks->attach(deployment);
  if (ranks && !ranks->runs_coordinator()) {
    ranks->serve(deployment);  // until rank 0 has served every request
    if (!ranks->failure().empty()) throw CommandError{ranks->failure()};
    return;
  }
  const std::vector<RequestSpec> requests = take(read_prompts_jsonl(a.prompts, c.vocab_size));
  deployment.submit(requests);
  std::unique_ptr<ChangeAt> change;
  if (!a.switch_policy.empty() || !a.switch_placement.empty()) {
    std::optional<RuntimePolicy> policy;
    if (!a.switch_policy.empty()) policy = a.serve.policy_for(layout, a.switch_policy);
    std::optional<Placement> placement;
    if (!a.switch_placement.empty()) placement = placement_of(a.switch_placement, layout, c);
    change = std::make_unique<ChangeAt>(deployment.coordinator(), std::move(policy), std::move(placement), a.switch_after);
    deployment.observers().add(nullptr, change.get());
  }
  std::unique_ptr<LiveTelemetry> live = LiveTelemetry::start(a.live);
  if (live) {
    std::fprintf(stderr, "%s\n", live->describe().c_str());
    RunInfo info;
    info.backend = a.backend;
    info.model_name = a.model.filename().string();
    info.model = c;
    info.row_bytes = static_cast<std::int64_t>(c.hidden_size) * 4;
    if (ranks) info.processes = [run = ranks.get()] { return run->processes(); };
    live->attach(deployment, std::move(info), {});
    if (ranks)
      ranks->on_rank_lost([bridge = live->bridge()](std::int32_t rank, const std::string& why) {
        bridge->rank_lost(rank, why);
      });
  }
  deployment.run();
  if (ranks) ranks->finish();
  if (live) live->detach();
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> outputs;
  std::int64_t rejected = 0, tokens = 0;
  for (const RequestRecord& r : deployment.coordinator().requests()) {
    if (r.state == RequestState::Rejected) {
      ++rejected;
      std::fprintf(stderr, "switchyard generate: rejected: %s\n", r.reject_reason.c_str());
    }
    tokens += static_cast<std::int64_t>(r.output.size());
    outputs.emplace_back(r.spec.external_id, r.output);
  }
  check(write_outputs_jsonl(a.out, outputs));
  std::fprintf(stderr, "served %zu requests (%lld rejected), %lld tokens, policy %s on %s (%lld switch(es)) -> %s\n",
               requests.size(), static_cast<long long>(rejected), static_cast<long long>(tokens),
               options.policy.describe().c_str(), layout.name.c_str(),
               static_cast<long long>(deployment.coordinator().policy_switches()), a.out.string().c_str());
  if (const Coordinator& co = deployment.coordinator(); co.prefix_cache_queries() > 0)
    std::fprintf(stderr, "%s\n", describe_prefix_cache(co.prefix_cache_hits(), co.prefix_cache_queries()).c_str());
  if (ranks && !ranks->failure().empty())
    throw CommandError{"the deployment stopped: " + ranks->failure() + "; " + std::to_string(rejected) +
                       " request(s) failed"};
}

void run(const GenerateArgs& a) {
  if (!a.prompts.empty()) {
    if (a.out.empty()) throw CommandError{"--prompts needs --out OUT.jsonl"};
    if (a.serve.layout.empty()) throw CommandError{"--prompts needs --layout FILE"};
    run_many(a);
    return;
  }
  if (a.tokens.empty()) throw CommandError{"give --tokens (one prompt) or --prompts (a JSONL file of requests)"};
  if (a.backend != "cpu")
    throw CommandError{"--backend " + a.backend + " needs --prompts and --layout (one --tokens prompt runs the cpu "
                       "reference path)"};
  const std::vector<std::int32_t> prompt = take(parse_token_list(a.tokens));
  auto weights = load_model(a.model);
  GenerateOptions options;
  options.max_new_tokens = a.max_new_tokens;
  options.sampling = {a.temperature, a.top_p, a.top_k, a.min_p};
  options.penalties = a.penalties;
  options.seed = a.seed;
  if (!a.ignore_eos) options.eos_token_id = weights->config().eos_token_id;
  ReferenceSession session(weights, static_cast<std::int32_t>(prompt.size()) + a.max_new_tokens);
  const std::vector<std::int32_t> out = take(generate(session, prompt, options));
  std::printf("%s\n", nlohmann::json(out).dump().c_str());
}

}  // namespace

void register_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "Continue a prompt; print the generated ids as a JSON array");
  sub->add_option("--model", args->model, "Hugging Face model directory")->required();
  auto* tokens = sub->add_option("--tokens", args->tokens, "Prompt token ids, comma-separated (one request)");
  sub->add_option("--prompts", args->prompts, "JSONL requests {\"id\",\"tokens\",\"max_new_tokens\"} (many requests)")
      ->excludes(tokens);
  sub->add_option("--out", args->out, "JSONL outputs {\"id\",\"output\"} (with --prompts)");
  args->serve.add_to(*sub, /*layout_required=*/false);
  // FinDEP's solver plans for a workload's batches; generate runs the layout's r1 and r2.
  sub->remove_option(sub->get_option("--findep-config"));
  args->live.add_to(*sub, /*default_on=*/false);
  sub->add_option("--max-new-tokens", args->max_new_tokens,
                  "Tokens to generate after --tokens (with --prompts each line's max_new_tokens)")
      ->check(CLI::Range(0, 1 << 20))->capture_default_str();
  sub->add_option("--temperature", args->temperature, "Sampling temperature (0: greedy)")
      ->check(CLI::Range(0.0f, 100.0f))->capture_default_str();
  sub->add_option("--top-p", args->top_p, "Nucleus sampling threshold")
      ->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
  sub->add_option("--top-k", args->top_k, "Keep only the k most likely tokens (0: all)")
      ->check(CLI::Range(0, 1 << 30))->capture_default_str();
  sub->add_option("--min-p", args->min_p, "Keep only tokens at least this fraction as likely as the most likely one (0: all)")
      ->check(CLI::Range(0.0f, 1.0f))->capture_default_str();
  sub->add_option("--presence-penalty", args->penalties.presence,
                  "Subtract this from the logit of every token generated before (OpenAI's presence_penalty)")
      ->check(CLI::Range(-2.0f, 2.0f))->capture_default_str();
  sub->add_option("--frequency-penalty", args->penalties.frequency,
                  "Subtract this times its count from the logit of every token generated before (OpenAI's "
                  "frequency_penalty)")
      ->check(CLI::Range(-2.0f, 2.0f))->capture_default_str();
  sub->add_option("--repetition-penalty", args->penalties.repetition,
                  "Scale the logits of every token of the prompt and of those generated before: divide a positive "
                  "one by this, multiply a negative one (vLLM's repetition_penalty; 1: off)")
      ->check(positive_number())->capture_default_str();
  sub->add_option("--seed", args->seed, "Sampling seed")->capture_default_str();
  sub->add_flag("--ignore-eos", args->ignore_eos, "Do not stop at the model's eos_token_id");
  sub->add_option("--clock", args->clock,
                  "With --prompts: wall (devices run concurrently on threads) or virtual (one after another on "
                  "virtual clocks, deterministic)")
      ->check(CLI::IsMember({"wall", "virtual"}))->capture_default_str();
  sub->add_option("--backend", args->backend,
                  "With --prompts: cpu (devices on host threads) or cuda (every device a worker on one GPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
  sub->add_option("--gpu", args->gpu, "With --backend cuda: the GPU of the layout's devices that give no `gpu` key")
      ->check(CLI::Range(0, 1023))->capture_default_str();
  sub->add_option("--cuda-graphs", args->cuda_graphs,
                  "With --backend cuda: on (decode attention as CUDA graphs) or off (every execution eagerly)")
      ->check(CLI::IsMember({"on", "off"}))->capture_default_str();
  sub->add_option("--switch-policy", args->switch_policy,
                  "With --prompts: switch to this policy (async, pingpong, sync or findep; the layout's other policy keys) "
                  "mid-run, at the next safe point after --switch-after tokens")
      ->check(CLI::IsMember({"async", "pingpong", "sync", "findep"}));
  sub->add_option("--switch-placement", args->switch_placement,
                  "With --prompts: switch to the expert placement of this layout file (same devices) mid-run, at the "
                  "next safe point after --switch-after tokens");
  sub->add_option("--switch-after", args->switch_after,
                  "Tokens sampled before --switch-policy / --switch-placement is asked for")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 40))->capture_default_str();
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
