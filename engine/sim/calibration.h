// Fits a hardware profile's roofline and GEMM-efficiency curve to measured GEMM times, so the
// simulator's cost model matches a real backend (`switchyard calibrate`).
#pragma once

#include <cstdint>
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

}  // namespace sy
