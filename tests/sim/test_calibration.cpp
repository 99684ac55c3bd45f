// The calibration fit on its own: samples drawn from a known roofline give that roofline back.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
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

// FinDEP's α + β·x fits (§4.1, §5.2) on synthetic measurements.
TEST(Calibration, LinearFitRecoversAlphaAndBetaFromNoisyPoints) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.01);
  std::vector<std::pair<double, double>> points;
  for (double x = 1e6; x <= 1e9; x *= 1.5) points.emplace_back(x, (0.17 + 8.59e-8 * x) * (1 + noise(rng)));
  const LinearFit fit = fit_linear_cost(points);
  EXPECT_NEAR(fit.cost.alpha_us, 0.17, 0.05);
  EXPECT_NEAR(fit.cost.beta_us / 8.59e-8, 1.0, 0.02);
  EXPECT_GT(fit.r_squared, 0.99);
  EXPECT_LE(fit.r_squared, 1.0);
}

TEST(Calibration, LinearFitIsExactOnALineAndNeverNegative) {
  const LinearFit exact = fit_linear_cost({{1, 3}, {2, 5}, {4, 9}});
  EXPECT_DOUBLE_EQ(exact.cost.alpha_us, 1);
  EXPECT_DOUBLE_EQ(exact.cost.beta_us, 2);
  EXPECT_DOUBLE_EQ(exact.r_squared, 1);
  // Points whose line would cross below zero: the intercept is clamped and β refitted.
  const LinearFit clamped = fit_linear_cost({{10, 1}, {20, 3}, {30, 5}});
  EXPECT_EQ(clamped.cost.alpha_us, 0);
  EXPECT_NEAR(clamped.cost.beta_us, (10 * 1 + 20 * 3 + 30 * 5) / (100.0 + 400 + 900), 1e-12);
  EXPECT_LT(clamped.r_squared, 1);
}

TEST(Calibration, RooflineFindepModelsFollowTheProfile) {
  HardwareProfile hw;
  hw.bf16_tflops = 100;
  hw.hbm_gbps = 1000;
  hw.gemm_efficiency = 0.5;
  hw.gemm_half_tokens = 16;
  hw.hbm_efficiency = 1;
  hw.kernel_overhead_us = 4;
  hw.nvlink_gbps = 200;
  hw.nvlink_latency_us = 3;
  const FindepPrimitives p = findep_primitives_from_roofline(hw);
  // Large GEMMs run at 2 FLOPs per m·k·n at 50 TFLOP/s: 4e-8 µs per unit of x.
  EXPECT_NEAR(p.gemm.beta_us / 4e-8, 1.0, 0.1);
  EXPECT_NEAR(p.attention.beta_us, 2 / 50e6, 1e-12);
  EXPECT_NEAR(p.attention.alpha_us, 4, 1e-6);
  EXPECT_DOUBLE_EQ(p.comm.alpha_us, 3);
  EXPECT_DOUBLE_EQ(p.comm.beta_us, 1e-3 / 200);
  hw.nvlink_gbps = 0;
  hw.pcie_gbps = 32;
  hw.nic_latency_us = 10;
  EXPECT_DOUBLE_EQ(findep_primitives_from_roofline(hw).comm.beta_us, 1e-3 / 32);
  EXPECT_DOUBLE_EQ(findep_primitives_from_roofline(hw).comm.alpha_us, 10);
}

}  // namespace
}  // namespace sy
