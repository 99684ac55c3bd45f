// Hardware profiles and model shapes shipped in assets/: every one loads, round-trips, and bad
// profiles are refused with a message naming the file and the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include <filesystem>
#include <fstream>

#include "engine/model/model_config.h"
#include "engine/sim/calibration.h"
#include "engine/sim/hardware_profile.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

const char* kGood = R"(name = "X"
bf16_tflops = 100
hbm_gbps = 1000
memory_gib = 40
nvlink_gbps = 0
nvlink_latency_us = 0
nic_gbps = 10
nic_latency_us = 5
pcie_gbps = 16
price = 1
gemm_efficiency = 0.7
gemm_half_tokens = 64
hbm_efficiency = 0.8
kernel_overhead_us = 5
)";

TEST(HardwareProfile, EveryShippedProfileLoadsAndRoundTrips) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(assets_dir() / "hardware")) {
    if (e.path().extension() != ".toml") continue;
    ++n;
    auto p = load_hardware_profile(e.path());
    ASSERT_TRUE(p.ok()) << p.status().message();
    const fs::path copy = fs::temp_directory_path() / ("sy_hw_" + std::to_string(::getpid()) + ".toml");
    ASSERT_TRUE(write_hardware_profile(*p, copy).ok());
    auto back = load_hardware_profile(copy);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, *p) << e.path();
    fs::remove(copy);
    auto by_name = find_hardware_profile(p->name);
    ASSERT_TRUE(by_name.ok()) << by_name.status().message();
    EXPECT_EQ(by_name->name, p->name);
  }
  EXPECT_GE(n, 9);  // A100-40G/80G, H100, H200, H20, L40S, L20, T4, L4
}

TEST(HardwareProfile, ErrorsNameTheFileAndTheProblem) {
  const auto expect_error = [](const std::string& text, const std::string& fragment) {
    auto p = parse_hardware_profile(text, "bad.toml");
    ASSERT_FALSE(p.ok()) << text;
    EXPECT_NE(p.status().message().find("bad.toml"), std::string::npos) << p.status().message();
    EXPECT_NE(p.status().message().find(fragment), std::string::npos) << p.status().message();
  };
  ASSERT_TRUE(parse_hardware_profile(kGood, "good.toml").ok());
  std::string s = kGood;
  expect_error(std::string(kGood) + "warp_size = 32\n", "unknown key 'warp_size'");
  expect_error(std::string(kGood).replace(s.find("hbm_gbps = 1000"), 15, "hbm_gbps = -3"), "'hbm_gbps' must be > 0");
  expect_error(std::string(kGood).replace(s.find("gemm_efficiency = 0.7"), 21, "gemm_efficiency = 1.5"),
               "'gemm_efficiency' is a fraction");
  expect_error(std::string(kGood).replace(s.find("price = 1\n"), 10, ""), "missing 'price'");
  expect_error("name = \"X\"\nbf16_tflops = \"fast\"\n", "'bf16_tflops' must be a number");
  expect_error("name = [", "bad.toml:1");
}

TEST(HardwareProfile, UnknownNameListsTheAvailableProfiles) {
  auto p = find_hardware_profile("b200");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("b200"), std::string::npos);
  EXPECT_NE(p.status().message().find("h100"), std::string::npos) << p.status().message();
}

TEST(ModelShapes, EveryShippedShapeHasItsPublishedSize) {
  struct Shape {
    const char* name;
    double total_b;
    double active_b;
  };
  const Shape shapes[] = {{"mixtral-8x7b", 46.7, 12.9},   {"mixtral-8x22b", 141, 39},  {"dbrx", 132, 36},
                          {"qwen3-235b-a22b", 235, 22},  {"scaled-moe", 317, 0},      {"mixtral-8x7b-16e-top1", 0, 0}};
  for (const Shape& s : shapes) {
    auto c = ModelConfig::from_file(assets_dir() / "models" / s.name / "config.json");
    ASSERT_TRUE(c.ok()) << c.status().message();
    const double total = static_cast<double>(c->parameter_count()) / 1e9;
    const double I = c->moe_intermediate_size;
    std::int32_t sparse = 0;
    for (std::int32_t l = 0; l < c->num_layers; ++l) sparse += c->is_sparse(l) ? 1 : 0;
    const double active = total - sparse * (c->num_experts - c->top_k) * 3.0 * c->hidden_size * I / 1e9;
    if (s.total_b > 0) {
      EXPECT_NEAR(total, s.total_b, s.total_b * 0.02) << s.name;
    }
    if (s.active_b > 0) {
      EXPECT_NEAR(active, s.active_b, s.active_b * 0.03) << s.name;
    }
  }
}

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
