// `switchyard calibrate`: measures the cpu backend's GEMMs at a range of batch sizes, fits the
// simulator's roofline and efficiency curve to them, and writes a hardware profile, so that a
// sim run predicts this machine. It also runs FinDEP's micro-benchmarks (§5.2: GEMM, attention
// core, A2E transfer) and fits their α + β·x models into the profile's [findep] table.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/sim/calibration.h"
#include "engine/util/progress.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/paged_attention.h"

namespace sy::cli {
namespace {

struct CalibrateArgs {
  std::filesystem::path out;
  std::string name = "host-cpu";
  bool quick = false;
  std::string findep_from_roofline;  // a profile: derive its [findep] table instead of measuring
};

double median_ns(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median of `reps` timed runs of fn, in µs, after a warm-up run.
template <typename Fn>
double median_us(int reps, Fn&& fn) {
  fn();
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return median_ns(times);
}

void print_fit(const char* what, const char* unit, const LinearFit& f) {
  std::printf("  %-10s alpha %8.2f us  beta %.4g us per %s  R^2 %.4f\n", what, f.cost.alpha_us, f.cost.beta_us, unit,
              f.r_squared);
}

// FinDEP §5.2 on this machine: GEMM time against x = m·k·n (from the GEMM samples), the causal
// attention core of one sequence against y = N_h·S²·(D_k + D_v), and an A2E transfer against
// its bytes. cpu devices share host memory; a transfer between separate memories is a copy,
// which is what is timed.
FindepPrimitives measure_findep(const CalibrateArgs& a, const std::vector<GemmSample>& gemm_samples) {
  std::vector<std::pair<double, double>> gemm;
  for (const GemmSample& s : gemm_samples) gemm.emplace_back(s.params * s.rows, s.ns / 1e3);
  const LinearFit gemm_fit = fit_linear_cost(gemm);

  const std::int32_t heads = 8, head_dim = 64, page = 16;
  const int reps = a.quick ? 3 : 9;
  std::vector<std::pair<double, double>> attention;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (std::int32_t S : a.quick ? std::vector<std::int32_t>{32, 64, 128} : std::vector<std::int32_t>{32, 64, 128, 256, 512}) {
    const std::int32_t pages = (S + page - 1) / page;
    const std::size_t row = static_cast<std::size_t>(heads) * head_dim;
    std::vector<float> k(static_cast<std::size_t>(pages * page) * row), v(k.size());
    std::vector<float> q(static_cast<std::size_t>(S) * row), out(q.size());
    for (auto& x : q) x = u(rng);
    std::vector<std::int32_t> table(static_cast<std::size_t>(pages)), positions(static_cast<std::size_t>(S));
    std::iota(table.begin(), table.end(), 0);
    std::iota(positions.begin(), positions.end(), 0);
    const kernels::KvLayerView cache{k.data(), v.data(), pages, page, heads, head_dim};
    kernels::kv_cache_write(cache, table.data(), 0, S, q.data(), q.data());
    const double us = median_us(reps, [&] {
      kernels::paged_attention(q.data(), S, heads, positions.data(), cache, table.data(), 0.125f, out.data());
    });
    attention.emplace_back(static_cast<double>(heads) * S * S * (2.0 * head_dim), us);
  }
  const LinearFit attention_fit = fit_linear_cost(attention);

  std::vector<std::pair<double, double>> comm;
  for (std::size_t bytes = 4096; bytes <= (a.quick ? (1u << 20) : (16u << 20)); bytes *= 4) {
    std::vector<char> src(bytes, 1), dst(bytes);
    const double us = median_us(reps, [&] { std::memcpy(dst.data(), src.data(), bytes); });
    comm.emplace_back(static_cast<double>(bytes), us);
  }
  const LinearFit comm_fit = fit_linear_cost(comm);
  std::printf("\nFinDEP models (alpha + beta * x):\n");
  print_fit("GEMM", "m*k*n", gemm_fit);
  print_fit("attention", "N_h*S^2*(D_k+D_v)", attention_fit);
  print_fit("A2E/E2A", "byte", comm_fit);
  return {gemm_fit.cost, attention_fit.cost, comm_fit.cost};
}

// The [findep] table of a shipped profile, derived from its roofline (for GPUs we cannot
// measure here); written back into the profile at --out.
void derive_findep(const CalibrateArgs& a) {
  HardwareProfile p = take(find_hardware_profile(a.findep_from_roofline));
  p.findep.reset();
  p.findep = findep_primitives_from_roofline(p);
  std::printf("[findep]  # %s, derived from its roofline\n", p.name.c_str());
  std::printf("gemm_alpha_us = %.17g\ngemm_beta_us = %.17g\n", p.findep->gemm.alpha_us, p.findep->gemm.beta_us);
  std::printf("attention_alpha_us = %.17g\nattention_beta_us = %.17g\n", p.findep->attention.alpha_us,
              p.findep->attention.beta_us);
  std::printf("comm_alpha_us = %.17g\ncomm_beta_us = %.17g\n", p.findep->comm.alpha_us, p.findep->comm.beta_us);
  if (!a.out.empty()) {
    check(write_hardware_profile(p, a.out));
    std::printf("wrote %s\n", a.out.string().c_str());
  }
}

void run(const CalibrateArgs& a) {
  if (!a.findep_from_roofline.empty()) return derive_findep(a);
  if (a.out.empty()) throw CommandError{"--out is required (the profile to write)"};
  // Expert-like shapes (gate/up and down of a small MoE) in bf16, the simulator's weight type.
  struct Shape {
    std::int64_t n, k;
  };
  const std::vector<Shape> shapes = a.quick ? std::vector<Shape>{{512, 256}} : std::vector<Shape>{{2048, 1024}, {1024, 2048}};
  const std::vector<std::int64_t> rows = a.quick ? std::vector<std::int64_t>{1, 4, 16, 64, 256}
                                                 : std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<GemmSample> samples;
  std::printf("%8s %8s %6s %12s %10s\n", "N", "K", "rows", "median us", "GFLOP/s");
  Progress progress("calibrate", static_cast<std::int64_t>(shapes.size() * rows.size()), "GEMM shapes");
  for (const Shape& s : shapes) {
    std::vector<std::uint16_t> w(static_cast<std::size_t>(s.n * s.k));
    for (auto& x : w) x = kernels::f32_to_bf16(u(rng));
    const kernels::WeightView view{w.data(), kernels::DType::BF16, s.n, s.k};
    for (std::int64_t m : rows) {
      std::vector<float> x(static_cast<std::size_t>(m * s.k)), y(static_cast<std::size_t>(m * s.n));
      for (auto& v : x) v = u(rng);
      std::vector<double> times;
      const int reps = a.quick ? 5 : 15;
      for (int r = 0; r < reps; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        kernels::linear(x.data(), m, view, nullptr, y.data(), false);
        times.push_back(static_cast<double>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count()));
      }
      const double ns = median_ns(times);
      samples.push_back({static_cast<double>(s.n * s.k), 2.0, static_cast<double>(m), ns});
      char line[128];
      std::snprintf(line, sizeof line, "%8lld %8lld %6lld %12.1f %10.1f", static_cast<long long>(s.n),
                    static_cast<long long>(s.k), static_cast<long long>(m), ns / 1e3,
                    2.0 * static_cast<double>(s.n * s.k * m) / ns);
      progress.add();
      progress.note(line, stdout);
    }
  }
  progress.finish();
  const CalibrationFit fit = fit_gemm_samples(samples);
  HardwareProfile base;
  base.name = a.name;
  base.memory_gib = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
                    1073741824.0;
  // A host has no scale-up link; its "network" between virtual devices is memory itself.
  base.nvlink_gbps = 0;
  base.nvlink_latency_us = 0;
  base.nic_gbps = fit.stream_gbps;
  base.nic_latency_us = 1;
  base.pcie_gbps = fit.stream_gbps;
  base.price = 0.05;  // placeholder: a CPU host has no price in MegaScale-Infer's table
  HardwareProfile p = apply_fit(fit, base);
  std::printf("\nfit: peak %.3f TFLOP/s, half at %.1f rows, weights streamed at %.1f GB/s, %.1f us per GEMM; "
              "RMS log error %.3f\n",
              fit.peak_tflops, fit.half_tokens, fit.stream_gbps, fit.overhead_us, fit.rms_log_error);
  p.findep = measure_findep(a, samples);
  check(write_hardware_profile(p, a.out));
  std::printf("wrote %s (use: --backend sim --hardware %s)\n", a.out.string().c_str(), a.out.string().c_str());
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* sub = app.add_subcommand("calibrate", "Measure this machine's GEMMs and write a hardware profile fitted to them");
  sub->add_option("--out", args->out, "Profile to write (TOML)");
  sub->add_option("--findep-from-roofline", args->findep_from_roofline,
                  "Instead of measuring: print the FinDEP [findep] table a profile's roofline gives (and write the "
                  "profile with it to --out)");
  sub->add_option("--name", args->name, "The profile's name")->capture_default_str();
  sub->add_flag("--quick", args->quick, "Fewer, smaller measurements (seconds instead of a minute)");
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
