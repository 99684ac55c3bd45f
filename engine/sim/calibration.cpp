#include "engine/sim/calibration.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "engine/model/model_config.h"
#include "engine/sim/roofline_cost_model.h"

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

LinearFit fit_linear_cost(const std::vector<std::pair<double, double>>& points) {
  assert(points.size() >= 2);
  const double n = static_cast<double>(points.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) sx += x, sy += y, sxx += x * x, sxy += x * y;
  const double denominator = n * sxx - sx * sx;
  assert(denominator > 0 && "fit_linear_cost needs two distinct x");
  LinearFit fit;
  fit.cost.beta_us = (n * sxy - sx * sy) / denominator;
  fit.cost.alpha_us = (sy - fit.cost.beta_us * sx) / n;
  if (fit.cost.alpha_us < 0) {
    fit.cost.alpha_us = 0;
    fit.cost.beta_us = sxy / sxx;
  }
  const double mean = sy / n;
  double ss_res = 0, ss_tot = 0;
  for (const auto& [x, y] : points) {
    const double e = y - fit.cost.at(x);
    ss_res += e * e;
    ss_tot += (y - mean) * (y - mean);
  }
  fit.r_squared = ss_tot > 0 ? 1 - ss_res / ss_tot : 1.0;
  return fit;
}

FindepPrimitives findep_primitives_from_roofline(const HardwareProfile& hw, double link_gbps, double link_latency_us) {
  const RooflineCostModel roofline(hw, ModelConfig{});
  FindepPrimitives p;
  // GEMMs with the weight shapes of an MoE layer (hidden 2k–7k, FFN 1.5k–18k) at the row
  // counts FinDEP's micro-batches reach; x = m·k·n.
  std::vector<std::pair<double, double>> gemm;
  for (double k : {2048.0, 4096.0, 7168.0})
    for (double n : {1536.0, 4096.0, 18432.0})
      for (double rows = 16; rows <= 65536; rows *= 4) gemm.emplace_back(rows * k * n, roofline.gemm_ns(k * n, rows) / 1e3);
  p.gemm = fit_linear_cost(gemm).cost;
  // Prefill attention core (FlashAttention-style, compute-bound): 2·y FLOPs for the workload
  // y = N_h·B·S²·(D_k + D_v) of §3.1, at the GEMM efficiency, one kernel.
  std::vector<std::pair<double, double>> attention;
  const double flops_per_us = hw.bf16_tflops * 1e6 * hw.gemm_efficiency;
  for (double s = 256; s <= 16384; s *= 2) {
    const double y = 32 * s * s * 256;
    attention.emplace_back(y, hw.kernel_overhead_us + 2 * y / flops_per_us);
  }
  p.attention = fit_linear_cost(attention).cost;
  p.comm = {link_latency_us, 1e-3 / link_gbps};  // GB/s = 1e3 bytes/µs
  return p;
}

FindepPrimitives findep_primitives_from_roofline(const HardwareProfile& hw) {
  // As the simulator's links (profile_links): without NVLink a node's devices talk over PCIe,
  // with the NIC's latency.
  return hw.nvlink_gbps > 0 ? findep_primitives_from_roofline(hw, hw.nvlink_gbps, hw.nvlink_latency_us)
                            : findep_primitives_from_roofline(hw, hw.pcie_gbps, hw.nic_latency_us);
}

}  // namespace sy
