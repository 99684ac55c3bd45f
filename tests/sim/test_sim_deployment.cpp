// The sim backend runs the runtime's own worker, queue, policy and dispatcher code with only
// its executor and clock swapped: every request is served under every policy, executions take
// what the roofline says, and a routing recorded on a cpu run replays exactly on the sim.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/sim/roofline_cost_model.h"
#include "engine/model/random_model.h"
#include "engine/runtime/layout.h"
#include "engine/cpu/cpu_deployment.h"
#include "engine/sim/sim_deployment.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

HardwareProfile test_gpu() {
  HardwareProfile hw;
  hw.name = "test-gpu";
  hw.bf16_tflops = 400;
  hw.hbm_gbps = 2000;
  hw.memory_gib = 80;
  hw.nvlink_gbps = 300;
  hw.nvlink_latency_us = 3;
  hw.nic_gbps = 25;
  hw.nic_latency_us = 10;
  hw.pcie_gbps = 32;
  hw.price = 1;
  hw.gemm_efficiency = 0.7;
  hw.gemm_half_tokens = 64;
  hw.hbm_efficiency = 0.8;
  hw.kernel_overhead_us = 5;
  return hw;
}

// A Mixtral-8x7B-like shape (no weights are ever read on the sim).
ModelConfig big_shape(std::int32_t top_k) {
  ModelConfig c = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16);
  c.hidden_size = 4096;
  c.num_layers = 8;
  c.sparse_layers.assign(8, true);
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = c.moe_intermediate_size = 14336;
  c.num_experts = 8;
  c.top_k = top_k;
  c.vocab_size = 32000;
  return c;
}

std::vector<RequestSpec> workload(std::int32_t vocab, double rate, double seconds) {
  WorkloadSpec w;
  w.length_class = LengthClass::Short;
  w.rate_per_s = rate;
  w.duration_s = seconds;
  w.seed = 3;
  w.vocab_size = vocab;
  return generate_workload(w);
}

RuntimePolicy make_policy(const std::string& kind, const std::string& scheduler, std::int32_t m) {
  PolicySpec p;
  p.policy = kind;
  p.scheduler = scheduler;
  p.microbatches = m;
  return *runtime_policy(p);
}

TEST(SimDeployment, EveryPolicyServesEveryRequestToItsLength) {
  const ModelConfig c = big_shape(2);
  const auto requests = workload(c.vocab_size, 50, 1.0);
  ASSERT_GT(requests.size(), 20u);
  struct Case {
    std::string layout;
    RuntimePolicy policy;
  };
  const std::vector<Case> cases = {
      {"disaggregated", make_policy("async", "defrag", 2)}, {"disaggregated", make_policy("async", "mtfs", 2)},
      {"disaggregated", make_policy("async", "flfs", 2)},   {"disaggregated", make_policy("pingpong", "defrag", 3)},
      {"colocated", make_policy("sync", "defrag", 2)},      {"disaggregated", make_policy("findep", "defrag", 2)}};
  for (const Case& k : cases) {
    const Layout layout = k.layout == "colocated" ? make_colocated_layout(8, c) : make_disaggregated_layout(4, 4, c);
    DeploymentOptions o;
    o.policy = k.policy;
    o.skew_lambda = 0.5;
    o.link = profile_links(test_gpu(), 8);
    SimDeployment d(c, test_gpu(), Topology::from_layout(layout, c), o);
    d.submit(requests);
    const std::int64_t end = d.run();
    EXPECT_GT(end, 1'000'000'000) << k.policy.describe();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const RequestRecord& r = d.coordinator().requests()[i];
      ASSERT_EQ(r.state, RequestState::Finished) << k.policy.describe() << " request " << i;
      EXPECT_EQ(static_cast<std::int32_t>(r.output.size()), requests[i].max_new_tokens);
    }
    const MetricsReport m = d.metrics().report(0, end);
    EXPECT_GT(m.tokens_per_s, 0) << k.policy.describe();
    // Time comes from the cost model: some device is busy a real share of the run.
    double busiest = 0;
    for (const DeviceUsage& u : m.devices) busiest = std::max(busiest, u.busy);
    EXPECT_GT(busiest, 0.01) << k.policy.describe();
    // Executions start and end on the loop's clock: a device is busy or stalled for a reason
    // all along, no host time (docs/cli.md).
    for (const DeviceUsage& u : m.devices) EXPECT_LT(u.host, 1e-4) << k.policy.describe() << " " << u.name;
  }
}

// The simulator with prefix caching: a workload whose prompts share a 256-token system prompt
// computes its pages once per rank, so every later request skips them (each prompt's page
// before its last token included), and the first token comes sooner; every request is served.
TEST(SimDeployment, PrefixCachingSkipsTheSharedPromptAndServesEveryRequest) {
  const ModelConfig c = big_shape(2);
  WorkloadSpec w;
  w.length_class = LengthClass::Short;
  w.rate_per_s = 50;
  w.duration_s = 1.0;
  w.seed = 3;
  w.vocab_size = c.vocab_size;
  w.shared_prefix = 256;
  const auto requests = generate_workload(w);
  ASSERT_GT(requests.size(), 20u);
  double ttft[2] = {0, 0};
  for (const bool caching : {false, true}) {
    DeploymentOptions o;
    o.policy = make_policy("async", "defrag", 2);
    o.link = profile_links(test_gpu(), 8);
    o.coordinator.prefix_caching = caching;
    SimDeployment d(c, test_gpu(), Topology::from_layout(make_disaggregated_layout(4, 4, c), c), o);
    d.submit(requests);
    const std::int64_t end = d.run();
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const RequestRecord& r = d.coordinator().requests()[i];
      ASSERT_EQ(r.state, RequestState::Finished) << "request " << i;
      EXPECT_EQ(static_cast<std::int32_t>(r.output.size()), requests[i].max_new_tokens);
    }
    const Coordinator& co = d.coordinator();
    EXPECT_EQ(co.kv_pages_used(), 0);
    if (caching) {
      // 256 shared tokens are 16 pages of 16; the four attention ranks each compute them once.
      std::int64_t expected = 0, served_from_cache = 0;
      for (std::size_t i = 0; i < requests.size(); ++i) served_from_cache += co.requests()[i].cached_positions;
      for (std::size_t i = 4; i < requests.size(); ++i) expected += 256;
      EXPECT_EQ(co.prefix_cache_hits(), served_from_cache);
      EXPECT_GE(served_from_cache, expected);
    } else {
      EXPECT_EQ(co.prefix_cache_hits(), 0);
    }
    ttft[caching] = d.metrics().report(0, end).ttft.p50_ms;
  }
  EXPECT_LT(ttft[1], ttft[0]);
}

TEST(SimDeployment, SkewConcentratesExpertLoad) {
  const ModelConfig c = big_shape(1);
  const auto requests = workload(c.vocab_size, 30, 0.5);
  const auto imbalance = [&](double lambda) {
    DeploymentOptions o;
    o.policy = make_policy("async", "defrag", 2);
    o.skew_lambda = lambda;
    const Layout layout = make_disaggregated_layout(2, 4, c);
    SimDeployment d(c, test_gpu(), Topology::from_layout(layout, c), o);
    d.submit(requests);
    d.run();
    double worst = 0;
    for (const auto& row : d.metrics().expert_load()) {
      if (row.empty()) continue;
      double sum = 0, mx = 0;
      for (std::int64_t v : row) sum += static_cast<double>(v), mx = std::max(mx, static_cast<double>(v));
      worst = std::max(worst, mx / (sum / static_cast<double>(c.num_experts)));
    }
    return worst;
  };
  EXPECT_LT(imbalance(0.0), 1.3);
  EXPECT_GT(imbalance(1.0), 2.5);
}

TEST(RooflineCostModel, DecodeIsBoundByWeightsAndLargeBatchesByCompute) {
  const ModelConfig c = big_shape(2);
  const HardwareProfile hw = test_gpu();
  RooflineCostModel cost(hw, c);
  // One expert (3 × 4096 × 14336 bf16 = 352 MB) at one token streams its weights.
  const std::int64_t one[] = {1};
  const double weights_ns = 3.0 * 4096 * 14336 * 2 / (hw.hbm_gbps * hw.hbm_efficiency);
  EXPECT_NEAR(static_cast<double>(cost.experts_ns(0, one)), weights_ns, weights_ns * 0.05);
  // 8 tokens cost about the same as 1 (memory bound); 4096 tokens are compute bound.
  const std::int64_t eight[] = {8}, many[] = {4096};
  EXPECT_LT(static_cast<double>(cost.experts_ns(0, eight)), 1.1 * static_cast<double>(cost.experts_ns(0, one)));
  const double flops = 2.0 * 3 * 4096 * 14336 * 4096;
  const double compute_ns = flops / (hw.bf16_tflops * 1e3 * hw.gemm_efficiency * 4096 / (4096 + hw.gemm_half_tokens));
  EXPECT_NEAR(static_cast<double>(cost.experts_ns(0, many)), compute_ns, compute_ns * 0.05);
  // Attention over a long context is bound by the KV read.
  const double kv_ns = 1e6 * 2 * 8 * 128 * 2 / (hw.hbm_gbps * hw.hbm_efficiency);
  EXPECT_GT(static_cast<double>(cost.attention_ns(0, 64, 1'000'000)), kv_ns);
}

// The sim's model looks up the terms that depend on rows alone: every cost must be the same
// integer as computed per call, for every row count in the table and past it, dense and sparse
// blocks, with and without a shared expert, at several tensor-parallel widths.
TEST(RooflineCostModel, TabulatedRowsCostExactlyWhatEachCallComputes) {
  const HardwareProfile hw = test_gpu();
  for (const bool shared : {false, true}) {
    for (const std::int32_t tp : {1, 2}) {
      ModelConfig c = big_shape(2);
      c.sparse_layers[0] = false;  // a dense first block, as DeepSeek-style models have
      c.intermediate_size = 11008;
      c.moe_intermediate_size = 1408;
      if (shared) c.shared_expert_intermediate_size = 5632;
      ASSERT_EQ(c.has_shared_expert(), shared);
      const RooflineCostModel computed(hw, c, tp);
      RooflineCostModel tabulated(hw, c, tp);
      tabulated.tabulate_rows(64);
      for (std::int64_t rows = 0; rows <= 80; ++rows) {
        for (const std::int64_t context : {std::int64_t{0}, rows, rows * 777, rows * 40'000 + 3}) {
          for (const std::int32_t block : {0, 1})
            ASSERT_EQ(tabulated.attention_ns(block, rows, context), computed.attention_ns(block, rows, context))
                << rows << " rows, context " << context << ", block " << block;
        }
        const std::int64_t per_expert[] = {rows, 0, rows / 3, rows + 1, 64 - rows % 64};
        ASSERT_EQ(tabulated.experts_ns(1, per_expert), computed.experts_ns(1, per_expert)) << rows;
        ASSERT_EQ(tabulated.sample_ns(rows), computed.sample_ns(rows)) << rows;
        ASSERT_EQ(tabulated.shared_expert_ns(1, rows), computed.shared_expert_ns(1, rows)) << rows;
      }
    }
  }
}

TEST(SyncBaseline, CollectiveLatencyComesFromTheLinksAndHostTimeIsPerIteration) {
  const HardwareProfile hw = test_gpu();
  const SyncBaselineCosts one_node = sync_baseline_costs(hw, 8, 8);
  EXPECT_EQ(one_node.collective_ns, 26'000);  // a 5 µs launch + 7 NVLink peers × 3 µs
  EXPECT_EQ(one_node.host_ns, 1'000'000);
  EXPECT_EQ(sync_baseline_costs(hw, 16, 8).collective_ns, 106'000);  // + 8 peers across the NIC × 10 µs
}

MetricsReport serve(const ModelConfig& c, const Layout& layout, const RuntimePolicy& policy,
                    const std::vector<RequestSpec>& requests, Coordinator** coordinator = nullptr,
                    std::unique_ptr<SimDeployment>* keep = nullptr) {
  DeploymentOptions o;
  o.policy = policy;
  o.skew_lambda = 0.5;
  o.link = profile_links(test_gpu(), 8);
  auto d = std::make_unique<SimDeployment>(c, test_gpu(), Topology::from_layout(layout, c), o);
  d->submit(requests);
  const std::int64_t end = d->run();
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const RequestRecord& r = d->coordinator().requests()[i];
    EXPECT_EQ(r.state, RequestState::Finished) << policy.describe() << " request " << i;
    EXPECT_EQ(static_cast<std::int32_t>(r.output.size()), requests[i].max_new_tokens) << policy.describe();
  }
  MetricsReport m = d->metrics().report(0, end);
  if (coordinator) *coordinator = &d->coordinator();
  if (keep) *keep = std::move(d);
  return m;
}

TEST(SimDeployment, CollectiveBarrierCostsWhatItStatesPerIteration) {
  // Too light a load to queue: each iteration of sync is its critical path, which the
  // collective barrier lengthens by the host's scheduling and, per sparse block, the dispatch
  // and combine all-to-alls.
  const ModelConfig c = big_shape(1);
  const auto requests = workload(c.vocab_size, 4, 1.0);
  const Layout layout = make_colocated_layout(8, c);
  RuntimePolicy collective = make_policy("sync", "defrag", 2), ideal = collective;
  ideal.collective_barrier = false;
  const double with = serve(c, layout, collective, requests).itl.mean_ms;
  const double without = serve(c, layout, ideal, requests).itl.mean_ms;
  const SyncBaselineCosts costs = sync_baseline_costs(test_gpu(), 8, 8);
  const double expected_ms =
      (static_cast<double>(costs.host_ns) + 2.0 * c.num_layers * static_cast<double>(costs.collective_ns)) * 1e-6;
  EXPECT_NEAR(with - without, expected_ms, 0.1 * expected_ms) << "collective " << with << " ms, ideal " << without;
}

TEST(SimDeployment, GatedQueuesWakeUpAndServeEveryRequest) {
  // The gate holds small queues and wakes the device when the first opens: no request may be
  // left behind (serve() checks every request's length), at a light load (every queue small,
  // the wake-ups do the work) and a heavy one (full queues first, the small ones starve only
  // for the bounded time).
  const ModelConfig c = big_shape(2);
  RuntimePolicy gated = make_policy("async", "defrag", 2);
  gated.gate = true;
  for (double rate : {5.0, 80.0}) {
    const MetricsReport m = serve(c, make_disaggregated_layout(4, 4, c), gated, workload(c.vocab_size, rate, 0.5));
    EXPECT_GT(m.tokens_per_s, 0) << rate;
  }
}

TEST(SimDeployment, AdaptiveSwitchesLiveWithItsReasonAndLosesNoToken) {
  const ModelConfig c = big_shape(2);
  const auto requests = workload(c.vocab_size, 60, 1.5);
  PolicySpec spec;
  spec.policy = "adaptive";
  spec.adaptive_async_from = 300;  // far below this load: it must leave sync within two windows
  Coordinator* co = nullptr;
  std::unique_ptr<SimDeployment> keep;
  serve(c, make_disaggregated_layout(4, 4, c), *runtime_policy(spec), requests, &co, &keep);
  const auto& switches = co->adaptive_switches();
  ASSERT_FALSE(switches.empty());
  EXPECT_EQ(switches[0].from.kind, PolicyKind::Sync);
  EXPECT_EQ(switches[0].to.kind, PolicyKind::Async);
  EXPECT_LE(switches[0].t_ns, 3 * Coordinator::kAdaptiveWindowNs);
  EXPECT_NE(switches[0].reason.find("async from 300"), std::string::npos) << switches[0].reason;
  EXPECT_GE(co->policy_switches(), 1);
  EXPECT_TRUE(co->policy().adaptive);
}

TEST(SimDeployment, AdaptiveTunerProbesEveryPolicyLiveAndLosesNoToken) {
  // No thresholds: the tuner serves a window under each of sync, pingpong and async once the
  // warm-up is over, and says what it measured; serve() checks every request's length.
  const ModelConfig c = big_shape(2);
  const auto requests = workload(c.vocab_size, 60, 1.5);
  PolicySpec spec;
  spec.policy = "adaptive";
  Coordinator* co = nullptr;
  std::unique_ptr<SimDeployment> keep;
  serve(c, make_disaggregated_layout(4, 4, c), *runtime_policy(spec), requests, &co, &keep);
  const auto& switches = co->adaptive_switches();
  ASSERT_GE(switches.size(), 3u);
  EXPECT_EQ(switches[0].from.kind, PolicyKind::Sync);
  EXPECT_EQ(switches[0].to.kind, PolicyKind::PingPong);
  EXPECT_NE(switches[0].reason.find("first probe"), std::string::npos) << switches[0].reason;
  EXPECT_EQ(switches[1].to.kind, PolicyKind::Async);
  for (const char* p : {"sync ", "pingpong ", "async "})
    EXPECT_NE(switches[2].reason.find(p), std::string::npos) << switches[2].reason;
  EXPECT_NE(switches[2].reason.find("keeps "), std::string::npos) << switches[2].reason;
  // The two probe switches drained what was in flight: some time, less than a window.
  const auto at = switches[2].reason.find("drained ");
  ASSERT_NE(at, std::string::npos) << switches[2].reason;
  const double drained_ms = std::stod(switches[2].reason.substr(at + 8));
  EXPECT_GT(drained_ms, 0);
  EXPECT_LT(drained_ms, 2 * Coordinator::kAdaptiveWindowNs * 1e-6);
  EXPECT_GE(co->policy_switches(), 2);
  EXPECT_TRUE(co->policy().adaptive);
}

TEST(SimDeployment, AdaptiveTunerLeavesALoadThatNeverHoldsToSyncTokenForToken) {
  // Far more arrivals than the cluster serves: the batch fills, the queue grows behind it until
  // arrivals stop, then the run drains. No window of that is a load the choice would serve, so
  // the tuner probes nothing and the run is sync's, to the token and the nanosecond.
  const ModelConfig c = big_shape(2);
  const auto requests = workload(c.vocab_size, 800, 1.0);
  PolicySpec spec;
  spec.policy = "adaptive";
  Coordinator* co = nullptr;
  std::unique_ptr<SimDeployment> keep;
  const Layout layout = make_disaggregated_layout(4, 4, c);
  const MetricsReport adaptive = serve(c, layout, *runtime_policy(spec), requests, &co, &keep);
  // Requests queued: the median waited for admission many iterations.
  EXPECT_GT(adaptive.ttft.p50_ms, 10 * adaptive.itl.p50_ms);
  for (const auto& sw : co->adaptive_switches()) ADD_FAILURE() << sw.t_ns << " ns: " << sw.reason;
  EXPECT_EQ(co->policy_switches(), 0);
  const MetricsReport sync = serve(c, layout, make_policy("sync", "defrag", 2), requests);
  EXPECT_EQ(adaptive.tokens_per_s, sync.tokens_per_s);
  EXPECT_EQ(adaptive.itl.p50_ms, sync.itl.p50_ms);
}

TEST(SimDeployment, RecordedCpuRoutingReplaysExactly) {
  // A real model routes on cpu; the sim, given the recorded trace and the same workload,
  // sends exactly the same tokens to every expert of every block.
  const fs::path dir = fs::temp_directory_path() / ("sy_test_sim_replay_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  ModelConfig config = preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::F32);
  ASSERT_TRUE(write_random_model(config, 4, dir).ok());
  auto weights = *ModelWeights::load(dir);
  const ModelConfig& c = weights->config();
  const auto requests = workload(c.vocab_size, 40, 0.3);
  const Layout layout = make_disaggregated_layout(2, 2, c);

  RoutingTrace trace({c.num_layers, c.num_experts, c.top_k});
  DeploymentOptions o;
  o.policy = make_policy("async", "defrag", 2);
  o.cost_model = std::make_shared<LinearCostModel>(10'000, 1'000);
  CpuDeployment cpu(weights, Topology::from_layout(layout, c), o,
                    [&](std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t,
                        const std::int32_t* ids) { trace.add(block, request, position, ids); });
  cpu.submit(requests);
  cpu.run();
  ASSERT_GT(trace.size(), 0u);
  const fs::path file = dir / "routing.txt";
  ASSERT_TRUE(trace.write(file).ok());
  auto loaded = RoutingTrace::load(file);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();

  // The cpu run's outputs decide the decode positions; the sim must see the same token counts.
  std::vector<RequestSpec> replay = requests;
  for (std::size_t i = 0; i < replay.size(); ++i)
    replay[i].max_new_tokens = static_cast<std::int32_t>(cpu.coordinator().requests()[i].output.size());
  DeploymentOptions so;
  so.policy = make_policy("pingpong", "defrag", 2);
  so.routing_trace = std::make_shared<RoutingTrace>(std::move(*loaded));
  SimDeployment sim(c, test_gpu(), Topology::from_layout(layout, c), so);
  sim.submit(replay);
  sim.run();
  EXPECT_EQ(sim.trace_misses(), 0);
  EXPECT_GT(sim.trace_lookups(), 0);
  EXPECT_EQ(sim.metrics().expert_load(), cpu.metrics().expert_load());
  fs::remove_all(dir);
}

TEST(RoutingTrace, RejectsMalformedFilesNamingTheLine) {
  const fs::path file = fs::temp_directory_path() / ("sy_test_trace_" + std::to_string(::getpid()) + ".txt");
  {
    std::ofstream(file) << "# switchyard routing trace v1\nlayers 2 experts 4 top_k 2\n0 0 0 1 2\n0 1 0 1 9\n";
  }
  auto r = RoutingTrace::load(file);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(":4:"), std::string::npos) << r.status().message();
  {
    std::ofstream(file) << "hello\n";
  }
  r = RoutingTrace::load(file);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not a routing trace"), std::string::npos);
  fs::remove(file);
}

TEST(RoutingTrace, TokensFarApartNeverShareARecord) {
  // Position 2^24 of request 0 and position 0 of request 1 once packed into the same key: the
  // second record was dropped as a repeat and its token replayed the first one's experts.
  std::istringstream in("# switchyard routing trace v1\nlayers 4 experts 8 top_k 2\n"
                        "0 16777216 0 6 7\n1 0 0 1 2\n268435456 0 0 3 4\n0 0 0 5 0\n");
  auto t = RoutingTrace::parse(in, "aliases.txt");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->size(), 4u);
  std::int32_t ids[2] = {-1, -1};
  ASSERT_TRUE(t->lookup(0, 1, 0, ids));
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 2);
  ASSERT_TRUE(t->lookup(0, 0, 16777216, ids));
  EXPECT_EQ(ids[0], 6);
  ASSERT_TRUE(t->lookup(0, 268435456, 0, ids));
  EXPECT_EQ(ids[0], 3);
  ASSERT_TRUE(t->lookup(0, 0, 0, ids));
  EXPECT_EQ(ids[0], 5);
  EXPECT_FALSE(t->lookup(1, 0, 0, ids));
}

TEST(RoutingTrace, RefusalsNameTheLineAndTheField) {
  const std::string head = "# switchyard routing trace v1\nlayers 4 experts 8 top_k 2\n";
  const auto refused = [](const std::string& text, std::initializer_list<std::string> fragments) {
    std::istringstream in(text);
    auto t = RoutingTrace::parse(in, "t.txt");
    ASSERT_FALSE(t.ok()) << text;
    for (const std::string& f : fragments)
      EXPECT_NE(t.status().message().find(f), std::string::npos) << "expected '" << f << "' in: " << t.status().message();
  };
  // A header with words beyond the shape is some other format.
  refused("# switchyard routing trace v1\nlayers 4 experts 8 top_k 2 junk\n0 0 0 1 2\n", {"t.txt:2:", "'junk'"});
  // The block is what is out of range, not the experts.
  refused(head + "0 0 1 1 2\n0 0 9 3 4\n", {"t.txt:4:", "block '9' is not below layers 4"});
  // A router never picks one expert twice for a token.
  refused(head + "0 0 0 3 3\n", {"t.txt:3:", "expert 3 is named twice"});
  refused(head + "0 0 0 1 8\n", {"t.txt:3:", "expert id '8' is not below experts 8"});
  refused(head + "0 2147483648 0 1 2\n", {"t.txt:3:", "position '2147483648'"});
  refused(head + "-1 0 0 1 2\n", {"t.txt:3:", "request '-1'"});
  refused(head + "0 0 0 1\n", {"t.txt:3:", "2 expert ids"});
  refused(head + "0 0 0 1 2 3\n", {"t.txt:3:", "2 expert ids"});
  // Other runs of blanks still separate the fields.
  std::istringstream blanks(head + "0\t0  1 1 2\n\n1 5 3 7 0\n");
  auto ok = RoutingTrace::parse(blanks, "t.txt");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->size(), 2u);
}

}  // namespace
}  // namespace sy
