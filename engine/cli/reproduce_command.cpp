// `switchyard reproduce amoe|megascale`: the papers' experiments on the sim backend, printed
// next to the papers' figures (AMoE Figs. 9-11, MegaScale-Infer Fig. 12). Ctrl-C or SIGTERM
// ends the run after the simulation under way, with the rows it has.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/sim/sim_experiment.h"
#include "engine/util/progress.h"

namespace sy::cli {
namespace {

struct ReproduceArgs {
  std::string paper;
  bool json = false;
  double duration = 6;   // cluster seconds per point
  double itl_target_ms = 150;
  double skew = 0.5;
  bool quick = false;
  bool verbose = false;
};

// The signal that asked the run to stop (0: none). A second one ends the process at once.
std::atomic<int> g_stop_signal{0};
void on_stop_signal(int signo) { g_stop_signal = signo; }

// Thrown between two simulations once a stop was asked for.
struct Interrupted {};

struct Row {
  std::string figure;
  std::string what;
  double paper = NAN;  // NaN: the paper gives no number (qualitative claim in `note`)
  double ours = NAN;
  std::string note;
};

ModelConfig model(const std::string& name) {
  return take(ModelConfig::from_file(assets_dir() / "models" / name / "config.json"));
}

RuntimePolicy policy(const std::string& kind, const std::string& scheduler = "defrag", std::int32_t m = 2) {
  PolicySpec p;
  p.policy = kind;
  p.scheduler = scheduler;
  p.microbatches = m;
  return take(runtime_policy(p));
}

class Reproduction {
 public:
  explicit Reproduction(const ReproduceArgs& a)
      : a_(a), progress_("reproduce " + a.paper, expected_rows(a), "rows") {}

  // The rows amoe() and megascale() add (the progress bar's total; keep in step with them).
  static std::int64_t expected_rows(const ReproduceArgs& a) {
    if (a.paper == "amoe") return (a.quick ? 2 : 6) + 3 + 2 * 4;
    if (a.paper == "megascale") return (a.quick ? 1 : 3) * 2;
    return 0;
  }
  std::size_t rows() const { return rows_.size(); }
  void end_progress() { progress_.finish(); }

  void amoe() {
    // §5 setup: Mixtral-8x7B with multi-query attention (one KV head), decode-heavy workloads,
    // exponential routing skew, 8 A100-80G on one node (Lambda, Table 3).
    const HardwareProfile a100_80 = take(find_hardware_profile("a100-80g"));
    const HardwareProfile a100_40 = take(find_hardware_profile("a100-40g"));
    const char* classes[] = {"short", "medium", "reasonable"};
    const double fig9_paper_top1[] = {2.7, 2.3, 2.0};
    for (std::int32_t top_k : {1, 2}) {
      for (int w = 0; w < 3; ++w) {
        if (a_.quick && w != 1) continue;
        SimScenario s = base(model("mixtral-8x7b"), a100_80, top_k, classes[w]);
        const double sync = max_tp(colocated(s, 8));
        const double async = max_tp(disaggregated(s, 4, 4));
        add({"AMoE Fig. 9", std::string("top-") + std::to_string(top_k) + " " + classes[w] +
                                ": async (4+4) / sync (8 colocated), max throughput",
             top_k == 1 ? fig9_paper_top1[w] : NAN, async / sync,
             top_k == 1 ? "" : "paper: async ahead, by less than top-1"});
      }
    }
    {
      // §5.2: 16 experts top-1 on 16 A100-40G over two p4d nodes, medium workload; the 8-GPU
      // points are the one-node runs of the 8-expert model.
      SimScenario s16 = base(model("mixtral-8x7b-16e-top1"), a100_40, 1, "medium");
      SimScenario s8 = base(model("mixtral-8x7b"), a100_40, 1, "medium");
      const double sync16 = max_tp(colocated(s16, 16)), async16 = max_tp(disaggregated(s16, 8, 8));
      const double sync8 = max_tp(colocated(s8, 8)), async8 = max_tp(disaggregated(s8, 4, 4));
      add({"AMoE Fig. 10", "sync 16 GPUs / sync 8 GPUs, max throughput", 1.0, sync16 / sync8,
           "paper: no throughput increase"});
      add({"AMoE Fig. 10", "async 16 GPUs / async 8 GPUs, max throughput", 1.92, async16 / async8, ""});
      add({"AMoE Fig. 10", "async / sync at 16 GPUs, max throughput", 3.0, async16 / sync16, ""});
    }
    for (std::int32_t top_k : {1, 2}) {
      // §5.3: schedulers at 80 % of defrag's maximum throughput, medium workload.
      SimScenario s = disaggregated(base(model("mixtral-8x7b"), a100_80, top_k, "medium"), 4, 4);
      const SimPoint peak = max_point(s);
      const double rate = 0.8 * peak.rate;
      const std::string k = "top-" + std::to_string(top_k);
      SimPoint by[3];
      const char* names[] = {"defrag", "mtfs", "flfs"};
      for (int i = 0; i < 3; ++i) {
        SimScenario t = s;
        t.policy = policy("async", names[i]);
        by[i] = run_sim_point(t, rate, a_.duration, a_.duration / 4);
        account(by[i]);
      }
      for (int i = 1; i < 3; ++i) {
        add({"AMoE Fig. 11", k + " at 80% load: " + names[i] + " / defrag throughput", NAN,
             by[i].report.tokens_per_s / by[0].report.tokens_per_s, "paper: defrag highest (ratio < 1)"});
        // A scheduler that livelocks (FLFS under steady arrivals, the paper's Fig. 12) produces
        // no token in the window: its latency is not a number, and the row says why.
        const bool starved = by[i].report.itl.count == 0;
        add({"AMoE Fig. 11", k + " at 80% load: " + names[i] + " / defrag mean ITL", NAN,
             starved ? NAN : by[i].report.itl.mean_ms / by[0].report.itl.mean_ms,
             starved ? "no token in the window: new arrivals starve later blocks (paper Fig. 12)"
                     : "paper: defrag lowest (ratio > 1)"});
      }
    }
  }

  void megascale() {
    // §6 ablation (Fig. 12): Ampere 80G nodes, 200 Gb/s per GPU between nodes; the deployment
    // balances attention and expert time; micro-batch size constant while m varies.
    const HardwareProfile a100 = take(find_hardware_profile("a100-80g"));
    struct Model {
      const char* name;
      double m3_over_m2;
      std::int32_t attention, expert;
    };
    const Model models[] = {{"mixtral-8x22b", 1.10, 4, 8}, {"dbrx", 1.28, 4, 16}, {"scaled-moe", 1.38, 8, 32}};
    for (const Model& m : models) {
      if (a_.quick && std::string(m.name) != "mixtral-8x22b") continue;
      ModelConfig c = model(m.name);
      double tp[4] = {0, 0, 0, 0};
      for (std::int32_t mb = 1; mb <= 3; ++mb) {
        SimScenario s = disaggregated(base(c, a100, c.top_k, "medium", /*mqa=*/false), m.attention, m.expert);
        s.policy = policy("pingpong", "defrag", mb);
        s.skew_lambda = 0;  // a balanced production mix: the ablation isolates the pipeline
        // A constant micro-batch of 128 requests per attention rank: with this many attention
        // devices per expert device, one micro-batch's attention and expert times are close
        // (MegaScale-Infer's constraint 1, Ta ≈ Te).
        s.max_batch_per_rank = 128 * mb;
        // Saturate: arrivals well above what the batch can serve.
        const SimPoint p = run_sim_point(s, 4000.0, a_.duration, a_.duration / 3);
        account(p);
        tp[mb] = p.report.tokens_per_s;
        if (a_.verbose) std::fprintf(stderr, "%s m=%d\n%s\n", m.name, mb, format_table(p.report).c_str());
      }
      add({"MegaScale-Infer Fig. 12", std::string(m.name) + ": throughput m=2 / m=1", 1.9, tp[2] / tp[1], ""});
      add({"MegaScale-Infer Fig. 12", std::string(m.name) + ": throughput m=3 / m=2", m.m3_over_m2, tp[3] / tp[2], ""});
    }
  }

  void print() const {
    if (a_.json) {
      for (const Row& r : rows_) {
        nlohmann::json j = {{"figure", r.figure}, {"what", r.what}};
        j["ours"] = std::isnan(r.ours) ? nlohmann::json(nullptr) : nlohmann::json(r.ours);
        j["paper"] = std::isnan(r.paper) ? nlohmann::json(nullptr) : nlohmann::json(r.paper);
        j["ratio"] = std::isnan(r.paper) ? nlohmann::json(nullptr) : nlohmann::json(r.ours / r.paper);
        if (!r.note.empty()) j["note"] = r.note;
        std::printf("%s\n", j.dump().c_str());
      }
      return;
    }
    std::printf("%-24s %-62s %7s %7s %7s  %s\n", "figure", "what", "paper", "ours", "ratio", "note");
    for (const Row& r : rows_) {
      char paper[32] = "-", ratio[32] = "-";
      if (!std::isnan(r.paper)) {
        std::snprintf(paper, sizeof paper, "%.2f", r.paper);
        std::snprintf(ratio, sizeof ratio, "%.2f", r.ours / r.paper);
      }
      char ours[32] = "-";
      if (!std::isnan(r.ours)) std::snprintf(ours, sizeof ours, "%.2f", r.ours);
      std::printf("%-24s %-62s %7s %7s %7s  %s\n", r.figure.c_str(), r.what.c_str(), paper, ours, ratio,
                  r.note.c_str());
    }
    std::printf("\n%d simulations, %.0f s of cluster time in %.0f s of wall time (%.2g× real time)\n", runs_,
                simulated_s_, wall_s_, wall_s_ > 0 ? simulated_s_ / wall_s_ : 0.0);
  }

 private:
  SimScenario base(ModelConfig c, const HardwareProfile& hw, std::int32_t top_k, const std::string& workload,
                   bool mqa = true) {
    c.top_k = top_k;
    if (mqa) c.num_kv_heads = 1;  // AMoE §5: multi-query attention to relieve KV capacity
    SimScenario s;
    s.config = c;
    s.hardware = hw;
    // AMoE raises the input rate until throughput saturates: concurrency is bounded by the KV
    // cache (which MQA makes large) and the latency target, not by a batch cap.
    s.max_batch_per_rank = 1 << 16;
    s.length_class = take(parse_length_class(workload));
    s.skew_lambda = a_.skew;
    s.seed = 7;
    return s;
  }
  SimScenario colocated(SimScenario s, std::int32_t n) {
    s.layout = make_colocated_layout(n, s.config);
    s.policy = policy("sync");
    return s;
  }
  SimScenario disaggregated(SimScenario s, std::int32_t a, std::int32_t e) {
    // Beyond one node, every node holds its share of attention and expert devices (the way a
    // multi-node deployment is laid out), so half of the traffic stays on NVLink.
    std::int32_t nodes = (a + e) / s.devices_per_node;
    if (nodes < 1 || (a + e) % s.devices_per_node != 0 || a % nodes != 0 || e % nodes != 0) nodes = 1;
    s.layout = make_disaggregated_layout(a, e, s.config, nodes);
    s.policy = policy("async", "defrag");
    return s;
  }
  SimPoint max_point(const SimScenario& s) {
    return max_sustained_throughput(s, a_.itl_target_ms, 20, 1.6, a_.duration, a_.duration / 4, 12,
                                    [this](const SimPoint& p) { account(p); });
  }
  double max_tp(const SimScenario& s) { return max_point(s).report.tokens_per_s; }
  void account(const SimPoint& p) {
    if (a_.verbose)
      std::fprintf(stderr, "    rate %.0f/s: %.0f tokens/s, mean ITL %.1f ms (%.1f s simulated in %.1f s)\n", p.rate,
                   p.report.tokens_per_s, p.report.itl.mean_ms, p.simulated_s, p.wall_s);
    ++runs_;
    simulated_s_ += p.simulated_s;
    wall_s_ += p.wall_s;
    progress_.update(progress_.done());  // the rate and ETA move between rows too
    if (g_stop_signal) throw Interrupted{};
  }
  void add(Row r) {
    progress_.set_total(std::max(progress_.done() + 1, expected_rows(a_)));
    progress_.add();
    if (!a_.json) {
      char line[512];
      std::snprintf(line, sizeof line, "  %s: %s = %.2f", r.figure.c_str(), r.what.c_str(), r.ours);
      progress_.note(line);
    }
    rows_.push_back(std::move(r));
  }

  const ReproduceArgs& a_;
  std::vector<Row> rows_;
  int runs_ = 0;
  double simulated_s_ = 0, wall_s_ = 0;
  Progress progress_;
};

void run(const ReproduceArgs& a) {
  Reproduction r(a);
  g_stop_signal = 0;
  struct sigaction action {}, previous_int{}, previous_term{};
  action.sa_handler = on_stop_signal;
  action.sa_flags = SA_RESETHAND;  // a second Ctrl-C is not caught: it ends the process
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &previous_int);
  ::sigaction(SIGTERM, &action, &previous_term);
  bool interrupted = false;
  try {
    if (a.paper == "amoe") r.amoe();
    if (a.paper == "megascale") r.megascale();
  } catch (const Interrupted&) {
    interrupted = true;
  }
  ::sigaction(SIGINT, &previous_int, nullptr);
  ::sigaction(SIGTERM, &previous_term, nullptr);
  r.end_progress();
  r.print();
  if (interrupted) {
    std::fflush(stdout);
    const int signo = g_stop_signal.load();
    throw CommandError{std::string("interrupted by ") + (signo == SIGTERM ? "SIGTERM" : "SIGINT") + " after " +
                           std::to_string(r.rows()) + " of " + std::to_string(Reproduction::expected_rows(a)) +
                           " rows (printed above)",
                       128 + signo};
  }
}

}  // namespace

void register_reproduce(CLI::App& app) {
  auto args = std::make_shared<ReproduceArgs>();
  CLI::App* sub = app.add_subcommand("reproduce", "Run a paper's experiments on the simulated cluster, side by side with its figures");
  sub->add_option("paper", args->paper, "amoe or megascale")->required()->check(CLI::IsMember({"amoe", "megascale"}));
  sub->add_flag("--json", args->json, "One JSON object per row: paper value, ours, ratio");
  sub->add_option("--duration", args->duration, "Cluster seconds simulated per point")->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--itl-target", args->itl_target_ms, "Mean inter-token latency target (ms) for maximum throughput")
      ->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--skew", args->skew, "λ of the exponential routing skew (AMoE's fit; the paper gives no value)")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  sub->add_flag("--quick", args->quick, "One workload and one model per figure (a smoke run)");
  sub->add_flag("--verbose", args->verbose, "Print every simulated point's metrics table to stderr");
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
