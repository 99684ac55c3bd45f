#include "engine/sim/calibration.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace sy {
namespace {

double model_ns(const GemmSample& s, double peak_flops_per_ns, double half, double bytes_per_ns, double overhead_ns) {
  const double compute = 2 * s.params * s.rows * (s.rows + half) / (peak_flops_per_ns * s.rows);
  const double memory = s.params * s.bytes_per_param / bytes_per_ns;
  return std::max(compute, memory) + overhead_ns;
}

double rms_log_error(const std::vector<GemmSample>& samples, double peak, double half, double bw, double overhead) {
  double sum = 0;
  for (const GemmSample& s : samples) {
    const double e = std::log(model_ns(s, peak, half, bw, overhead) / s.ns);
    sum += e * e;
  }
  return std::sqrt(sum / static_cast<double>(samples.size()));
}

}  // namespace

CalibrationFit fit_gemm_samples(const std::vector<GemmSample>& samples) {
  assert(!samples.empty());
  // Starting point from the extremes: the most rows give compute, the fewest give bandwidth.
  double peak = 0, bw = 0;
  for (const GemmSample& s : samples) {
    peak = std::max(peak, 2 * s.params * s.rows / s.ns);
    bw = std::max(bw, s.params * s.bytes_per_param / s.ns);
  }
  double half = 16, overhead = 0;
  double best = rms_log_error(samples, peak, half, bw, overhead);
  // Coordinate descent over multiplicative steps: four parameters, a smooth objective, and a
  // few dozen samples make this exact enough and dependency-free.
  for (double step = 2.0; step > 1.0005; step = std::sqrt(step)) {
    for (bool improved = true; improved;) {
      improved = false;
      for (int p = 0; p < 4; ++p) {
        for (double f : {step, 1 / step}) {
          double c[4] = {peak, half, bw, overhead};
          c[p] = p == 3 ? (c[p] == 0 ? (f > 1 ? 100.0 : 0.0) : c[p] * f) : c[p] * f;
          const double e = rms_log_error(samples, c[0], c[1], c[2], c[3]);
          if (e < best - 1e-12) {
            best = e;
            peak = c[0], half = c[1], bw = c[2], overhead = c[3];
            improved = true;
          }
        }
      }
    }
  }
  return {peak / 1e3, half, bw, overhead / 1e3, best};
}

HardwareProfile apply_fit(const CalibrationFit& fit, HardwareProfile base) {
  base.bf16_tflops = fit.peak_tflops;
  base.gemm_efficiency = 1.0;
  base.gemm_half_tokens = fit.half_tokens;
  base.hbm_gbps = fit.stream_gbps;
  base.hbm_efficiency = 1.0;
  base.kernel_overhead_us = fit.overhead_us;
  return base;
}

}  // namespace sy
