// The calibration fit on its own: samples drawn from a known roofline give that roofline back.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engine/sim/calibration.h"
#include "engine/sim/hardware_profile.h"

namespace sy {
namespace {

TEST(Calibration, RecoversTheRooflineThatGeneratedTheSamples) {
  // Samples from a known device: 50 TFLOP/s peak, half at 32 rows, 1000 GB/s, 4 us overhead.
  std::vector<GemmSample> samples;
  for (double params : {4e6, 16e6})
    for (double rows = 1; rows <= 2048; rows *= 2) {
      const double compute = 2 * params * rows * (rows + 32) / (50e3 * rows);
      const double memory = params * 2 / 1000;
      samples.push_back({params, 2, rows, std::max(compute, memory) + 4000});
    }
  const CalibrationFit fit = fit_gemm_samples(samples);
  EXPECT_NEAR(fit.peak_tflops, 50, 2.5);
  EXPECT_NEAR(fit.half_tokens, 32, 4);
  EXPECT_NEAR(fit.stream_gbps, 1000, 50);
  EXPECT_NEAR(fit.overhead_us, 4, 0.5);
  EXPECT_LT(fit.rms_log_error, 0.02);
  HardwareProfile base;
  base.name = "fitted";
  const HardwareProfile p = apply_fit(fit, base);
  EXPECT_EQ(p.gemm_efficiency, 1.0);
  EXPECT_EQ(p.bf16_tflops, fit.peak_tflops);
}

}  // namespace
}  // namespace sy
