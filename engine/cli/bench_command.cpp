// `switchyard bench`: a Poisson workload through the runtime (cpu or sim); prints throughput,
// latency and per-device busy/stall, several policies side by side, and on cpu the same run
// on the wall clock (devices concurrent) next to virtual time (measured durations summed).
// On sim, the independent runs of --compare and --sweep go on --jobs threads; their output is
// printed on the main thread in the serial order, so it does not depend on the thread count.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <optional>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/serve_options.h"
#include "engine/cli/backend_options.h"
#include "engine/cli/live_telemetry.h"
#include "engine/cli/number_validators.h"
#include "engine/dist/distributed_run.h"
#include "engine/plan/expert_rebalance.h"
#include "engine/serving/workload.h"
#include "engine/util/job_pool.h"
#include "engine/util/thread_cpu_time.h"

namespace sy::cli {
namespace {

struct BenchArgs {
  std::string model;
  ServeOptions serve;
  BackendOptions backend;
  std::string workload = "short";
  std::int32_t shared_prefix = 0;
  double rate = 20;
  double duration = 2;
  std::string skew;
  std::uint64_t seed = 0;
  bool json = false;
  std::string compare;
  std::string sweep;
  std::string rebalance;          // "greedy", "eplb" or both, comma-separated
  std::int32_t rebalance_slots = 0;  // 0: one more than a device holds now
  double rebalance_min_load = 0;     // K: the least one replica costs, tokens over the run
  TelemetryFlags live;
  int jobs = 0;  // sim runs at once; 0: not given (JobPool::default_threads())
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// A --compare entry: a policy name, or findep with its configuration: "findep:auto" (FinDEP's
// solver chooses) or "findep:R1xR2" / "findep:R1xR2:aass" (hand-picked r1, r2 and order).
struct CompareEntry {
  std::string policy;
  bool solve = false;
  std::optional<RuntimePolicy> findep;  // hand-picked
};

CompareEntry parse_compare_entry(const std::string& entry) {
  CompareEntry e;
  const auto colon = entry.find(':');
  e.policy = entry.substr(0, colon);
  if (colon == std::string::npos) return e;
  const std::string rest = entry.substr(colon + 1);
  const auto bad = [&] {
    return CommandError{"bad --compare entry '" + entry +
                        "' (expected a policy, findep:auto or findep:R1xR2[:asas|aass], e.g. findep:2x3:aass)"};
  };
  if (e.policy != "findep") throw bad();
  if (rest == "auto") {
    e.solve = true;
    return e;
  }
  int r1 = 0, r2 = 0, used = 0;
  char order[8] = {};
  if (std::sscanf(rest.c_str(), "%dx%d%n", &r1, &r2, &used) != 2) throw bad();
  if (rest.size() > static_cast<std::size_t>(used) &&
      (std::sscanf(rest.c_str() + used, ":%4s", order) != 1 || rest.size() != static_cast<std::size_t>(used) + 5))
    throw bad();
  PolicySpec spec;
  spec.policy = "findep";
  spec.microbatches = r1;
  spec.expert_chunks = r2;
  if (order[0]) spec.order = order;
  auto policy = runtime_policy(spec);
  if (!policy.ok()) throw CommandError{"--compare entry '" + entry + "': " + policy.status().message()};
  e.findep = *policy;
  return e;
}

// --sweep: "R1,R2,…" (arrivals per second) or "auto:N" (N loads evenly spaced up to --rate:
// rate·1/N, rate·2/N, …, rate).
std::vector<double> parse_sweep(const std::string& text, double top_rate) {
  const auto bad = [&](const std::string& why) {
    return CommandError{"bad --sweep '" + text + "': " + why +
                        " (expected rates like 10,20,40 or auto:N for N loads up to --rate)"};
  };
  std::vector<double> rates;
  if (text.rfind("auto:", 0) == 0) {
    std::size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(text.substr(5), &used);
    } catch (const std::exception&) {
      throw bad("N is not a number");
    }
    if (used != text.size() - 5 || n < 1 || n > 1000) throw bad("N must be an integer in [1, 1000]");
    for (int i = 1; i <= n; ++i) rates.push_back(top_rate * i / n);
    return rates;
  }
  for (const std::string& item : split(text)) {
    std::size_t used = 0;
    double r = 0;
    try {
      r = std::stod(item, &used);
    } catch (const std::exception&) {
      throw bad("'" + item + "' is not a number");
    }
    if (used != item.size() || !(r > 0) || !std::isfinite(r)) throw bad("'" + item + "' is not a positive rate");
    rates.push_back(r);
  }
  if (rates.empty()) throw bad("no rate");
  return rates;
}

struct BenchRun {
  std::string label;
  Clock clock = Clock::Virtual;
  MetricsReport report;
  double simulated_s = 0;  // virtual time the run covered
  double wall_s = 0;       // wall time it took
  double cpu_s = 0;        // CPU time of the thread that ran it
  std::int64_t events = 0;  // event-loop events run
  Placement placement;                            // the placement it ran with
  std::vector<std::vector<std::int64_t>> expert_load;  // [block][expert] tokens routed
  std::vector<std::int64_t> routed;               // [device] tokens routed to its experts
  std::int64_t prefix_queries = 0, prefix_hits = 0;  // --prefix-caching: prompt tokens, and those cached
  std::optional<TraceReplay> trace;  // --routing
};

void add_trace_replay(nlohmann::json& j, const Backend& backend, const BenchRun& r) {
  if (!r.trace) return;
  j["routing_trace"] = {{"file", backend.routing_file().string()},
                        {"routed_tokens", r.trace->routed},
                        {"misses", r.trace->misses},
                        {"fallback", r.trace->fallback}};
}

// ranks: this process's part when a launcher started several (the other ranks serve the same
// runs in the same order, and only rank 0 reports). log: where the run's messages go (the
// findep configuration chosen, the adaptive policy's decisions); null: stderr at once. A run
// on a pool thread collects them for the main thread to print in the serial order.
BenchRun run_one(const BenchArgs& a, const Backend& backend, const Layout& layout, const std::string& policy,
                 Clock clock, const std::vector<RequestSpec>& requests, LiveTelemetry* live,
                 dist::DistributedRun* ranks, const Placement* placement = nullptr, std::string* log = nullptr) {
  const auto say = [log](const std::string& line) {
    if (log) *log += line + "\n";
    else std::fprintf(stderr, "%s\n", line.c_str());
  };
  const ModelConfig& c = backend.config();
  const CompareEntry entry = parse_compare_entry(policy);
  DeploymentOptions options = a.serve.deployment_options(layout, entry.policy, a.skew, a.seed);
  options.clock = clock;
  Topology topology = Topology::from_layout(layout, c);
  if (placement) {
    topology.placement = *placement;
    topology.finalize();
  }
  const Placement ran_with = topology.placement;
  if (entry.findep) options.policy = *entry.findep;
  if (options.policy.kind == PolicyKind::FinDep && !entry.findep) {
    ServeOptions serve = a.serve;
    if (entry.solve) serve.findep_config = "auto", serve.microbatches = serve.expert_chunks = 0;
    // Over a request's life its context averages its prompt and half its new tokens.
    double context = 0;
    for (const RequestSpec& r : requests) context += static_cast<double>(r.prompt.size()) + r.max_new_tokens / 2.0;
    context /= static_cast<double>(std::max<std::size_t>(1, requests.size()));
    const std::string chosen = serve.resolve_findep(options, *backend.findep_costs(), topology, context);
    if (!chosen.empty()) say(chosen);
  }
  if (ranks) {
    ranks->place(topology);
    ranks->configure(options, backend.run_info().row_bytes);
  }
  auto deployment = backend.deploy(std::move(topology), options);
  // However this returns, the other ranks' messages stop reaching the loop before it goes.
  struct Detach {
    dist::DistributedRun* run;
    ~Detach() {
      if (run) run->detach();
    }
  } detach{ranks};
  if (ranks) ranks->attach(*deployment);
  if (ranks && !ranks->runs_coordinator()) {
    ranks->serve(*deployment);
    if (!ranks->failure().empty()) throw CommandError{ranks->failure()};
    return {};
  }
  deployment->submit(requests);
  if (live) {
    RunInfo info = backend.run_info();
    if (ranks) info.processes = [ranks] { return ranks->processes(); };
    live->attach(*deployment, std::move(info), {});
    if (ranks)
      ranks->on_rank_lost([bridge = live->bridge()](std::int32_t rank, const std::string& why) {
        bridge->rank_lost(rank, why);
      });
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_seconds();
  const std::int64_t end = deployment->run();
  const double cpu = thread_cpu_seconds() - cpu0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (ranks) {
    ranks->finish();
    if (!ranks->failure().empty()) throw CommandError{"the deployment stopped: " + ranks->failure()};
  }
  if (live) live->detach();
  // The adaptive policy's decisions, when and why (a sweep would print every load's).
  if (!a.json && a.sweep.empty())
    for (const Coordinator::AdaptiveSwitch& sw : deployment->coordinator().adaptive_switches()) {
      char line[64];
      std::snprintf(line, sizeof line, "adaptive at %.3f s: ", static_cast<double>(sw.t_ns) * 1e-9);
      say(line + policy_name(sw.from.kind) + " -> " + policy_name(sw.to.kind) + ": " + sw.reason);
    }
  return {options.policy.describe(),
          clock,
          deployment->metrics().report(0, end),
          static_cast<double>(end) * 1e-9,
          wall,
          cpu,
          deployment->events_run(),
          ran_with,
          deployment->metrics().expert_load(),
          deployment->metrics().routed_per_device(),
          deployment->coordinator().prefix_cache_queries(),
          deployment->coordinator().prefix_cache_hits(),
          backend.trace_replay(*deployment)};
}

// The threads a study's runs get: --jobs (default: the hardware threads), at most one per run, 1
// when `serial` says why they cannot run at once (said on stderr when --jobs asked for more).
int bench_jobs(const BenchArgs& a, std::size_t runs, const std::string& serial) {
  if (!serial.empty()) {
    if (a.jobs > 1) std::fprintf(stderr, "--jobs %d: the runs go one at a time: %s\n", a.jobs, serial.c_str());
    return 1;
  }
  const int jobs = a.jobs > 0 ? a.jobs : JobPool::default_threads();
  return static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(jobs), std::max<std::size_t>(runs, 1)));
}

// Why the runs of this bench cannot run at once (empty: they can).
std::string serial_reason(const Backend& backend, const LiveTelemetry* live) {
  if (!backend.sim())
    return "--backend " + std::string(backend.cuda() ? "cuda" : "cpu") +
           " runs real math on this machine's threads and devices, timed on the wall clock";
  if (live) return "telemetry, control and recording follow one deployment at a time";
  return "";
}

// Runs that may go at once, on `jobs` threads: run(i) makes the i-th; returns them in order,
// each one's messages printed to stderr before the next's, then says on stderr (unless --json)
// what the study cost: wall time and the CPU time summed over the threads.
template <class RunAt>
std::vector<BenchRun> run_all(const BenchArgs& a, std::size_t count, int jobs, RunAt run,
                              const std::function<void(std::size_t)>& after = {}) {
  std::vector<BenchRun> runs;
  if (jobs <= 1) {
    for (std::size_t i = 0; i < count; ++i) {
      runs.push_back(run(i, nullptr));
      if (after) after(i);
    }
    return runs;
  }
  const auto t0 = std::chrono::steady_clock::now();
  struct Done {
    BenchRun run;
    std::string log;
  };
  JobPool pool(jobs);
  std::vector<std::future<Done>> pending;
  for (std::size_t i = 0; i < count; ++i)
    pending.push_back(pool.submit([&run, i] {
      Done d;
      d.run = run(i, &d.log);
      return d;
    }));
  double cpu = 0;
  for (std::size_t i = 0; i < count; ++i) {
    Done d = pending[i].get();
    std::fputs(d.log.c_str(), stderr);
    cpu += d.run.cpu_s;
    runs.push_back(std::move(d.run));
    if (after) after(i);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!a.json)
    std::fprintf(stderr, "%zu simulations on %d threads: %.2f s of wall time, %.2f s of CPU time summed over them\n",
                 count, jobs, wall, cpu);
  return runs;
}

// --sweep: every policy at every load, one table (and one JSON array) side by side.
void run_sweep(const BenchArgs& a, const Backend& backend, const Layout& layout,
               const std::vector<std::string>& policies) {
  if (!backend.sim()) throw CommandError{"--sweep runs on --backend sim (a cpu sweep would take minutes per load)"};
  if (!a.live.record.empty()) throw CommandError{"--record with --sweep would put every run's events on one time base"};
  const std::vector<double> rates = parse_sweep(a.sweep, a.rate);
  const ModelConfig& c = backend.config();
  std::unique_ptr<LiveTelemetry> live = LiveTelemetry::start(a.live);
  if (live && !a.json) std::fprintf(stderr, "%s\n", live->describe().c_str());
  std::vector<std::vector<RequestSpec>> workloads;  // [rate]
  for (double rate : rates) {
    WorkloadSpec spec;
    spec.length_class = take(parse_length_class(a.workload));
    spec.rate_per_s = rate;
    spec.duration_s = a.duration;
    spec.seed = a.seed;
    spec.vocab_size = c.vocab_size;
    spec.shared_prefix = a.shared_prefix;
    workloads.push_back(generate_workload(spec));
  }
  // Every (rate, policy) run is independent: rate-major, as the serial order had them.
  const std::size_t n = policies.size();
  const int jobs = bench_jobs(a, rates.size() * n, serial_reason(backend, live.get()));
  std::vector<BenchRun> flat = run_all(
      a, rates.size() * n, jobs,
      [&](std::size_t i, std::string* log) {
        return run_one(a, backend, layout, policies[i % n], Clock::Virtual, workloads[i / n], live.get(), nullptr,
                       nullptr, log);
      },
      [&](std::size_t i) {
        if (!a.json && i % n == n - 1) std::fprintf(stderr, "rate %g req/s: %zu policies done\n", rates[i / n], n);
      });
  std::vector<std::vector<BenchRun>> runs;  // [rate][policy]
  for (std::size_t i = 0; i < flat.size(); ++i) {
    if (i % n == 0) runs.emplace_back();
    runs.back().push_back(std::move(flat[i]));
  }
  backend.finish();

  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (std::size_t i = 0; i < rates.size(); ++i) {
      nlohmann::json load;
      load["rate_per_s"] = rates[i];
      load["runs"] = nlohmann::json::array();
      for (const BenchRun& r : runs[i]) {
        nlohmann::json j = to_json(r.report);
        j["policy"] = r.label;
        j["throughput_ratio"] = r.report.tokens_per_s / runs[i][0].report.tokens_per_s;
        j["speed_vs_real_time"] = r.wall_s > 0 ? r.simulated_s / r.wall_s : 0.0;
        add_trace_replay(j, backend, r);
        load["runs"].push_back(std::move(j));
      }
      out.push_back(std::move(load));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("workload %s for %.1f s at each rate, seed %llu%s\nmodel %s, layout %s\n%s\n\n", a.workload.c_str(),
              a.duration, static_cast<unsigned long long>(a.seed), a.skew.empty() ? "" : (", skew " + a.skew).c_str(),
              backend.model_name().c_str(), layout.name.c_str(),
              backend.describe(static_cast<std::int32_t>(layout.devices.size()), Clock::Virtual).c_str());
  // One row per load; per policy its throughput and ITL p50/p99; the best throughput marked.
  constexpr int kColumn = 28;
  std::printf("%8s", "");
  for (const BenchRun& r : runs[0]) {
    std::string name = r.label.substr(0, r.label.find(' '));
    if (static_cast<int>(name.size()) > kColumn - 2) name.resize(kColumn - 2);
    std::printf(" | %-*s", kColumn, name.c_str());
  }
  std::printf("\n%8s", "req/s");
  for (std::size_t p = 0; p < runs[0].size(); ++p) std::printf(" | %9s %8s %9s", "tok/s", "ITL p50", "p99 (ms)");
  std::printf("\n");
  for (std::size_t i = 0; i < rates.size(); ++i) {
    std::size_t best = 0;
    for (std::size_t p = 1; p < runs[i].size(); ++p)
      if (runs[i][p].report.tokens_per_s > runs[i][best].report.tokens_per_s) best = p;
    std::printf("%8.4g", rates[i]);
    for (std::size_t p = 0; p < runs[i].size(); ++p) {
      const MetricsReport& m = runs[i][p].report;
      std::printf(" | %8.0f%s %8.2f %9.2f", m.tokens_per_s, p == best && runs[i].size() > 1 ? "*" : " ", m.itl.p50_ms,
                  m.itl.p99_ms);
    }
    std::printf("\n");
  }
  if (runs[0].size() > 1) std::printf("\n* the highest throughput at that load\n");
  if (backend.routing_trace()) {
    std::printf("\n");
    for (std::size_t i = 0; i < rates.size(); ++i)
      for (const BenchRun& r : runs[i])
        if (r.trace) std::printf("%g req/s, %s: %s\n", rates[i], r.label.c_str(), backend.describe(*r.trace).c_str());
  }
}

// max / mean of `per_device` over `devices` (1 when nothing was routed).
double max_over_mean(const std::vector<double>& per_device, const std::vector<std::int32_t>& devices) {
  double top = 0, sum = 0;
  for (std::int32_t d : devices) {
    const double v = static_cast<std::size_t>(d) < per_device.size() ? per_device[static_cast<std::size_t>(d)] : 0.0;
    top = std::max(top, v);
    sum += v;
  }
  return sum > 0 ? top * static_cast<double>(devices.size()) / sum : 1.0;
}

// --rebalance: the layout's placement, then each planner's proposal made from that run's
// expert load, on the same workload; expert load per device and throughput side by side.
void run_rebalance(const BenchArgs& a, const Backend& backend, const Layout& layout, const std::string& policy,
                   const std::vector<RequestSpec>& requests) {
  std::vector<RebalanceAlgorithm> algorithms;
  for (const std::string& name : split(a.rebalance)) algorithms.push_back(take(parse_rebalance_algorithm(name)));
  if (algorithms.empty()) throw CommandError{"--rebalance needs greedy, eplb or greedy,eplb"};
  if (!a.live.record.empty()) throw CommandError{"--record with --rebalance would put every run's events on one time base"};
  const Clock clock = backend.clock();
  std::vector<BenchRun> runs;
  runs.reserve(1 + algorithms.size());  // `base` below refers into it
  runs.push_back(run_one(a, backend, layout, policy, clock, requests, nullptr, nullptr));
  const std::string policy_label = runs.back().label;
  runs.back().label = "layout";
  const BenchRun& base = runs.front();
  const std::int32_t num_devices = static_cast<std::int32_t>(layout.devices.size());
  RebalanceInputs in;
  in.current = base.placement;
  in.num_devices = num_devices;
  in.load.resize(static_cast<std::size_t>(in.current.num_blocks()));
  for (std::int32_t b = 0; b < in.current.num_blocks() && b < static_cast<std::int32_t>(base.expert_load.size()); ++b) {
    if (!in.current.is_sparse(b) || base.expert_load[static_cast<std::size_t>(b)].empty()) continue;
    auto& row = in.load[static_cast<std::size_t>(b)];
    row.assign(static_cast<std::size_t>(in.current.num_experts()), 0.0);
    for (std::size_t e = 0; e < base.expert_load[static_cast<std::size_t>(b)].size() && e < row.size(); ++e)
      row[e] = static_cast<double>(base.expert_load[static_cast<std::size_t>(b)][e]);
  }
  std::vector<bool> hosts(static_cast<std::size_t>(num_devices), false);
  std::int32_t most = 0;
  for (std::int32_t b = 0; b < in.current.num_blocks(); ++b) {
    if (!in.current.is_sparse(b)) continue;
    std::vector<std::int32_t> used(static_cast<std::size_t>(num_devices), 0);
    for (std::int32_t e = 0; e < in.current.num_experts(); ++e)
      for (std::int32_t d : in.current.devices(b, e)) {
        hosts[static_cast<std::size_t>(d)] = true;
        most = std::max(most, ++used[static_cast<std::size_t>(d)]);
      }
  }
  for (std::int32_t d = 0; d < num_devices; ++d)
    if (hosts[static_cast<std::size_t>(d)]) in.devices.push_back(d);
  in.slots_per_device = a.rebalance_slots > 0 ? a.rebalance_slots : most + 1;
  in.min_load = a.rebalance_min_load;
  std::vector<RebalanceProposal> proposals;
  for (RebalanceAlgorithm algorithm : algorithms) proposals.push_back(take(plan_rebalance(algorithm, in)));
  // The first run plans every proposal; the proposals' runs are independent of each other.
  const int jobs = bench_jobs(a, proposals.size(), serial_reason(backend, nullptr));
  std::vector<BenchRun> tried = run_all(a, proposals.size(), jobs, [&](std::size_t i, std::string* log) {
    return run_one(a, backend, layout, policy, clock, requests, nullptr, nullptr, &proposals[i].placement, log);
  });
  for (std::size_t i = 0; i < tried.size(); ++i) {
    runs.push_back(std::move(tried[i]));
    runs.back().label = std::string(rebalance_algorithm_name(algorithms[i]));
  }
  backend.finish();

  struct Row {
    std::string label;
    std::int32_t replicas = 0;
    double predicted_device = 1, predicted_layer = 1, measured_device = 1;
    const BenchRun* run = nullptr;
  };
  std::vector<Row> rows;
  const auto measured = [&](const BenchRun& r) {
    std::vector<double> v(r.routed.begin(), r.routed.end());
    return max_over_mean(v, in.devices);
  };
  {
    Row r{"layout", proposals.empty() ? 0 : proposals.front().replicas_before, 1, 1, measured(base), &base};
    if (!proposals.empty()) {
      r.predicted_device = max_over_mean(proposals.front().load_before, in.devices);
      r.predicted_layer = proposals.front().imbalance_before;
    }
    rows.push_back(r);
  }
  for (std::size_t i = 0; i < proposals.size(); ++i)
    rows.push_back({runs[i + 1].label, proposals[i].replicas_after, max_over_mean(proposals[i].load_after, in.devices),
                    proposals[i].imbalance_after, measured(runs[i + 1]), &runs[i + 1]});

  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json j = to_json(r.run->report);
      j["placement"] = r.label;
      j["slots"] = in.slots_per_device;
      j["replicas"] = r.replicas;
      j["predicted_device_max_over_mean"] = r.predicted_device;
      j["predicted_layer_max_over_mean"] = r.predicted_layer;
      j["measured_device_max_over_mean"] = r.measured_device;
      j["routed_per_device"] = r.run->routed;
      j["throughput_ratio"] = r.run->report.tokens_per_s / base.report.tokens_per_s;
      add_trace_replay(j, backend, *r.run);
      out.push_back(std::move(j));
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("workload %s, %.1f req/s for %.1f s (%zu requests), seed %llu%s\nmodel %s, layout %s, policy %s\n%s\n",
              a.workload.c_str(), a.rate, a.duration, requests.size(), static_cast<unsigned long long>(a.seed),
              a.skew.empty() ? "" : (", skew " + a.skew).c_str(), backend.model_name().c_str(), layout.name.c_str(),
              policy_label.c_str(), backend.describe(num_devices, clock).c_str());
  std::printf("proposals planned from the first run's expert load (%zu expert devices, %d slots per device and block),\n"
              "each run on the same workload; expert load = tokens routed to a device's experts\n\n",
              in.devices.size(), in.slots_per_device);
  std::printf("%-8s %8s %14s %14s %14s %10s %7s %9s %9s\n", "placement", "replicas", "dev max/mean", "dev max/mean",
              "layer max/mean", "tokens/s", "ratio", "ITL p50", "TTFT p50");
  std::printf("%-8s %8s %14s %14s %14s %10s %7s %9s %9s\n", "", "", "(predicted)", "(measured)", "(predicted)", "", "",
              "(ms)", "(ms)");
  for (const Row& r : rows)
    std::printf("%-8s %8d %14.3f %14.3f %14.3f %10.1f %6.2fx %9.2f %9.2f\n", r.label.c_str(), r.replicas,
                r.predicted_device, r.measured_device, r.predicted_layer, r.run->report.tokens_per_s,
                r.run->report.tokens_per_s / base.report.tokens_per_s, r.run->report.itl.p50_ms,
                r.run->report.ttft.p50_ms);
  if (backend.routing_trace()) {
    std::printf("\n");
    for (const Row& r : rows)
      if (r.run->trace) std::printf("%s: %s\n", r.label.c_str(), backend.describe(*r.run->trace).c_str());
  }
}

void run(const BenchArgs& a) {
  const Backend backend = Backend::open(a.backend, a.model);
  const ModelConfig& c = backend.config();
  const Layout layout = a.serve.load(c);
  WorkloadSpec spec;
  spec.length_class = take(parse_length_class(a.workload));
  spec.rate_per_s = a.rate;
  spec.duration_s = a.duration;
  spec.seed = a.seed;
  spec.vocab_size = c.vocab_size;
  spec.shared_prefix = a.shared_prefix;
  check(validate_workload(spec));
  const std::vector<RequestSpec> requests = generate_workload(spec);

  std::vector<std::string> policies = split(a.compare);
  if (policies.empty()) policies.push_back(a.serve.policy);
  bool any_findep = false;
  for (const auto& p : policies) {
    PolicySpec asked = layout.policy;
    if (!p.empty()) asked.policy = parse_compare_entry(p).policy;
    check(validate_policy(asked).with_context("--compare"));
    any_findep = any_findep || asked.policy == "findep";
  }
  // With --compare it applies to the findep entries (those without a configuration of their own).
  if (!a.serve.findep_config.empty() && !any_findep)
    throw CommandError{"--findep-config auto configures findep: the policy is " + a.compare +
                       (a.compare.empty() ? layout.policy.policy : "")};

  if (!a.sweep.empty()) {
    // Every rank would run the whole sweep on its own: refused as --backend sim is below.
    if (dist::RankEnvironment env = take(dist::RankEnvironment::from_process()); env.distributed())
      throw CommandError{"--sweep runs in one process (on --backend sim); ranks started by " + env.launcher +
                         " serve one deployment"};
    return run_sweep(a, backend, layout, policies);
  }
  if (!a.rebalance.empty()) {
    if (policies.size() > 1) throw CommandError{"--rebalance compares placements under one policy: drop --compare"};
    if (dist::RankEnvironment env = take(dist::RankEnvironment::from_process()); env.distributed())
      throw CommandError{"--rebalance runs in one process"};
    return run_rebalance(a, backend, layout, policies.front(), requests);
  }
  if (!a.live.record.empty() && policies.size() > 1)
    throw CommandError{"--record with --compare would put every run's events on one time base: record one policy at a time"};
  // Under a launcher (mpirun, srun, RANK/WORLD_SIZE) this process is one rank of each run's
  // deployment: cpu backend, wall clock.
  const dist::RankEnvironment env = take(dist::RankEnvironment::from_process());
  std::unique_ptr<dist::DistributedRun> ranks;
  if (env.distributed()) {
    if (backend.sim()) throw CommandError{"--backend sim runs in one process; ranks started by " + env.launcher +
                                          " serve --backend cpu"};
    if (a.backend.clock == "virtual")
      throw CommandError{"--clock virtual runs in one process; ranks started by " + env.launcher + " need --clock wall"};
    Topology topology = Topology::from_layout(layout, c);
    const std::string identity = "bench backend=" + a.backend.backend + " workload=" + a.workload + " rate=" + std::to_string(a.rate) +
                                 " duration=" + std::to_string(a.duration) + " skew=" + a.skew +
                                 " seed=" + std::to_string(a.seed) + " compare=" + a.compare;
    ranks = take(dist::DistributedRun::join(env, layout, a.model, identity, topology,
                                            backend.device_links(layout, topology, env)));
    std::fprintf(stderr, "%s\n", ranks->describe(topology).c_str());
  }
  // cpu: each policy on virtual time and on the wall clock, unless --clock picks one.
  std::vector<Clock> clocks{backend.clock()};
  if (!backend.sim() && (a.backend.clock.empty() || a.backend.clock == "both")) clocks = {Clock::Virtual, Clock::Wall};
  if (ranks) clocks = {Clock::Wall};
  // Refused before the telemetry starts: it would announce (and open) the recording first.
  if (clocks.size() > 1 && !a.live.record.empty())
    throw CommandError{"--record with both clocks would put two runs on one time base: pass --clock wall or virtual"};
  std::unique_ptr<LiveTelemetry> live = ranks && !ranks->runs_coordinator() ? nullptr : LiveTelemetry::start(a.live);
  if (live && !a.json) std::fprintf(stderr, "%s\n", live->describe().c_str());
  // On sim the policies' runs are independent (one virtual clock each): they may go at once.
  const std::size_t count = policies.size() * clocks.size();
  const int jobs = count > 1 ? bench_jobs(a, count, serial_reason(backend, live.get())) : 1;
  std::vector<BenchRun> runs = run_all(a, count, jobs, [&](std::size_t i, std::string* log) {
    return run_one(a, backend, layout, policies[i / clocks.size()], clocks[i % clocks.size()], requests, live.get(),
                   ranks.get(), nullptr, log);
  });
  if (ranks && !ranks->runs_coordinator()) return;  // rank 0 reports
  backend.finish();

  if (a.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const BenchRun& r : runs) {
      nlohmann::json j = to_json(r.report);
      j["policy"] = r.label;
      j["clock"] = clock_name(r.clock);
      const BenchRun& base = *std::find_if(runs.begin(), runs.end(), [&](const BenchRun& b) { return b.clock == r.clock; });
      j["throughput_ratio"] = r.report.tokens_per_s / base.report.tokens_per_s;
      j["backend"] = a.backend.backend;
      j["speed_vs_real_time"] = r.wall_s > 0 ? r.simulated_s / r.wall_s : 0.0;
      if (r.prefix_queries > 0) j["prefix_cache"] = {{"queries", r.prefix_queries}, {"hits", r.prefix_hits}};
      add_trace_replay(j, backend, r);
      out.push_back(j);
    }
    std::printf("%s\n", (runs.size() == 1 ? out[0] : out).dump(2).c_str());
    return;
  }
  std::printf("workload %s, %.1f req/s for %.1f s (%zu requests), seed %llu%s\nmodel %s, layout %s\n%s\n\n",
              a.workload.c_str(), a.rate, a.duration, requests.size(), static_cast<unsigned long long>(a.seed),
              a.skew.empty() ? "" : (", skew " + a.skew).c_str(), backend.model_name().c_str(), layout.name.c_str(),
              backend.describe(static_cast<std::int32_t>(layout.devices.size()), clocks.back()).c_str());
  if (clocks.size() > 1)
    std::printf("each policy runs twice: on virtual time (every execution lasts its measured time, one device after\n"
                "another) and on the wall clock (devices concurrent on threads; what this machine really serves)\n\n");
  for (const BenchRun& r : runs) {
    std::printf("== %s, %s clock\n%s", r.label.c_str(), std::string(clock_name(r.clock)).c_str(),
                format_table(r.report).c_str());
    if (r.prefix_queries > 0) std::printf("%s\n", describe_prefix_cache(r.prefix_hits, r.prefix_queries).c_str());
    if (r.trace) std::printf("%s\n", backend.describe(*r.trace).c_str());
    if (backend.sim())
      std::printf("simulated %.2f s of cluster time in %.2f s of wall time: %.2g× real time (%lld events, %.0f ns each)\n",
                  r.simulated_s, r.wall_s, r.wall_s > 0 ? r.simulated_s / r.wall_s : 0.0, static_cast<long long>(r.events),
                  r.events > 0 ? r.wall_s * 1e9 / static_cast<double>(r.events) : 0.0);
    std::printf("\n");
  }
  if (runs.size() > 1) {
    // Ratios against the first policy on the same clock.
    int width = 6;
    for (const BenchRun& r : runs) width = std::max(width, static_cast<int>(r.label.size()));
    std::printf("%-*s %-8s %12s %8s %10s %10s %10s\n", width, "policy", "clock", "tokens/s", "ratio", "ITL p50",
                "ITL p99", "TTFT p50");
    for (const BenchRun& r : runs) {
      const BenchRun& base = *std::find_if(runs.begin(), runs.end(), [&](const BenchRun& b) { return b.clock == r.clock; });
      std::printf("%-*s %-8s %12.1f %7.2fx %8.2fms %8.2fms %8.2fms\n", width, r.label.c_str(),
                  std::string(clock_name(r.clock)).c_str(), r.report.tokens_per_s,
                  r.report.tokens_per_s / base.report.tokens_per_s, r.report.itl.p50_ms, r.report.itl.p99_ms,
                  r.report.ttft.p50_ms);
    }
    if (clocks.size() > 1) {
      std::printf("\nwall / virtual tokens/s:");
      for (std::size_t i = 0; i + 1 < runs.size(); i += 2)
        std::printf(" %s %.2fx", runs[i].label.c_str(), runs[i + 1].report.tokens_per_s / runs[i].report.tokens_per_s);
      std::printf("\n");
    }
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Serve a Poisson workload through the runtime and print metrics");
  sub->add_option("--model", args->model,
                  "Hugging Face model directory (sim: also a config.json or a name from assets/models)")->required();
  args->serve.add_to(*sub, /*layout_required=*/true);
  args->backend.add_to(*sub, /*with_both=*/true);
  sub->add_option("--workload", args->workload, "Length class")
      ->check(CLI::IsMember({"short", "medium", "reasonable"}))->capture_default_str();
  sub->add_option("--shared-prefix", args->shared_prefix,
                  "Every prompt begins with the same N tokens (a system prompt) before its drawn ones: what "
                  "--prefix-caching serves")
      ->check(CLI::Range(0, kMaxSharedPrefix))->capture_default_str();
  sub->add_option("--rate", args->rate, "Arrivals per second (Poisson)")->check(positive_number())
      ->capture_default_str();
  sub->add_option("--duration", args->duration, "Seconds of arrivals")->check(positive_number())
      ->capture_default_str();
  sub->add_option("--skew", args->skew, "Routing-skew override exp:λ (expert popularity ∝ exp(-λ·rank))");
  sub->add_option("--seed", args->seed, "Workload seed")->capture_default_str();
  sub->add_flag("--json", args->json, "Print the metrics as JSON");
  sub->add_option("--compare", args->compare,
                  "Policies to run side by side on the same workload, e.g. sync,pingpong,async; findep:auto (the "
                  "solver's r1, r2, order) or findep:R1xR2[:asas|aass] (hand-picked)");
  sub->add_option("--sweep", args->sweep,
                  "sim: run at each of these loads, e.g. 10,20,40 (req/s) or auto:N (N loads up to --rate), "
                  "and print throughput and ITL per policy side by side");
  sub->add_option("--rebalance", args->rebalance,
                  "Run the layout's placement, then each expert-rebalancing proposal made from that run's expert "
                  "load (greedy, eplb or greedy,eplb), and print per-device expert load and throughput side by side");
  sub->add_option("--rebalance-slots", args->rebalance_slots,
                  "Expert replicas a device may hold per block for --rebalance (default: one more than it holds now)")
      ->check(positive_number());
  sub->add_option("--rebalance-min-load", args->rebalance_min_load,
                  "K for --rebalance: the least one expert replica costs, in tokens over the run (default 0)")
      ->check(non_negative_number());
  args->live.add_to(*sub, /*default_on=*/false);
  sub->add_option("--jobs", args->jobs,
                  "sim: --compare and --sweep runs at once on threads (default: the hardware threads, " +
                      std::to_string(JobPool::default_threads()) +
                      " here; 1: one after another); output and results are the same for any N. One at a time "
                      "whatever N on cpu and cuda (real math, wall clock) and with telemetry, control or --record; "
                      "--rebalance: the layout's run first, then its proposals' runs at once")
      ->check(CLI::Range(1, 1024));
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
