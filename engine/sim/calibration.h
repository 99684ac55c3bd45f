// Fits a hardware profile's roofline and GEMM-efficiency curve to measured GEMM times, so the
// simulator's cost model matches a real backend (`switchyard calibrate`).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/sim/hardware_profile.h"

namespace sy {

// One measurement: a GEMM over a weight of `params` parameters (`bytes_per_param` each) and
// `rows` activation rows took `ns`.
struct GemmSample {
  double params = 0;
  double bytes_per_param = 2;
  double rows = 0;
  double ns = 0;
};

struct CalibrationFit {
  double peak_tflops = 0;      // what large GEMMs reach (gemm_efficiency is then 1)
  double half_tokens = 0;      // rows at half of it
  double stream_gbps = 0;      // weight streaming bandwidth (hbm_efficiency is then 1)
  double overhead_us = 0;      // fixed cost per GEMM
  double rms_log_error = 0;    // fit quality: RMS of ln(model / measured)
};

// Least squares in log space over the roofline model of RooflineCostModel::gemm_ns:
//   t(n) = max(2·P·n / (peak · n / (n + h)), bytes(P) / bw) + overhead.
// Needs samples at small and large row counts; asserts a non-empty input.
CalibrationFit fit_gemm_samples(const std::vector<GemmSample>& samples);

// A profile of the fitted device: compute and memory from the fit, the rest from `base`.
HardwareProfile apply_fit(const CalibrationFit& fit, HardwareProfile base);

// FinDEP's α + β·x models (§4.1) fitted by ordinary least squares to measured (x, µs) points.
struct LinearFit {
  LinearCost cost;
  double r_squared = 0;  // 1 − SS_res / SS_tot; 1 when every point is on the line
};
// Needs two distinct x; a negative intercept (noise at small x) is clamped to 0 and β refitted
// through the origin, since a task never takes negative time.
LinearFit fit_linear_cost(const std::vector<std::pair<double, double>>& x_us);

// FinDEP's primitive models of a device as its roofline predicts them: GEMMs (the shapes of
// an MoE layer, 16 to 64k rows) and the prefill attention core fitted as FinDEP's
// micro-benchmarks are, and A2E/E2A over a link of `link_gbps` and `link_latency_us`.
FindepPrimitives findep_primitives_from_roofline(const HardwareProfile& hw, double link_gbps, double link_latency_us);
// The same over the device's scale-up link (NVLink, or PCIe where it has none).
FindepPrimitives findep_primitives_from_roofline(const HardwareProfile& hw);

}  // namespace sy
