// `switchyard calibrate`: measures the cpu backend's GEMMs at a range of batch sizes, fits the
// simulator's roofline and efficiency curve to them, and writes a hardware profile, so that a
// sim run predicts this machine.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/sim/calibration.h"
#include "engine/util/progress.h"
#include "kernels/cpu/dtype.h"
#include "kernels/cpu/gemm.h"

namespace sy::cli {
namespace {

struct CalibrateArgs {
  std::filesystem::path out;
  std::string name = "host-cpu";
  bool quick = false;
};

double median_ns(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run(const CalibrateArgs& a) {
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
  const HardwareProfile p = apply_fit(fit, base);
  std::printf("\nfit: peak %.3f TFLOP/s, half at %.1f rows, weights streamed at %.1f GB/s, %.1f us per GEMM; "
              "RMS log error %.3f\n",
              fit.peak_tflops, fit.half_tokens, fit.stream_gbps, fit.overhead_us, fit.rms_log_error);
  check(write_hardware_profile(p, a.out));
  std::printf("wrote %s (use: --backend sim --hardware %s)\n", a.out.string().c_str(), a.out.string().c_str());
}

}  // namespace

void register_calibrate(CLI::App& app) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* sub = app.add_subcommand("calibrate", "Measure this machine's GEMMs and write a hardware profile fitted to them");
  sub->add_option("--out", args->out, "Profile to write (TOML)")->required();
  sub->add_option("--name", args->name, "The profile's name")->capture_default_str();
  sub->add_flag("--quick", args->quick, "Fewer, smaller measurements (seconds instead of a minute)");
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
