// The device profiles of assets/hardware/: every shipped one parses and holds its sourced
// numbers, profiles round-trip through the writer, and bad files are refused with a message
// naming the file and the problem.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "engine/sim/calibration.h"
#include "engine/sim/hardware_profile.h"
#include "tests/model/model_test_util.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using testing_util::FailsWith;
using testing_util::read_file;
using testing_util::TempDir;
using testing_util::write_file;

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

const char* kKeys[] = {"name",           "bf16_tflops",      "hbm_gbps",       "memory_gib",
                       "nvlink_gbps",    "nvlink_latency_us", "nic_gbps",      "nic_latency_us",
                       "pcie_gbps",      "price",            "gemm_efficiency", "gemm_half_tokens",
                       "hbm_efficiency", "kernel_overhead_us"};

// kGood with the line of `key` replaced by `line` (empty: removed).
std::string with_line(const std::string& key, const std::string& line) {
  std::string text = kGood;
  const std::size_t at = text.find(key + " = ");
  EXPECT_NE(at, std::string::npos) << key;
  const std::size_t end = text.find('\n', at);
  text.replace(at, end - at + 1, line.empty() ? "" : line + "\n");
  return text;
}

// Sets (or, given nullopt, unsets) an environment variable and restores it when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value->c_str(), 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(HardwareProfiles, AssetsDirDefaultsToTheSourceTreeAndFollowsTheEnvironment) {
  {
    ScopedEnv unset("SWITCHYARD_ASSETS", std::nullopt);
    EXPECT_EQ(fs::weakly_canonical(assets_dir()), fs::weakly_canonical(fs::path(SY_SOURCE_DIR) / "assets"));
  }
  ScopedEnv env("SWITCHYARD_ASSETS", "/somewhere/else");
  EXPECT_EQ(assets_dir(), fs::path("/somewhere/else"));
}

TEST(HardwareProfiles, EveryShippedProfileParsesAndValidates) {
  const std::set<std::string> expected = {"a100-40g", "a100-80g", "h100", "h200", "h20",
                                          "l40s",     "l20",      "t4",   "l4",   "a6000", "a10"};
  const std::set<std::string> pcie_only = {"l40s", "l20", "t4", "l4", "a6000", "a10"};
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(assets_dir() / "hardware")) {
    if (e.path().extension() != ".toml") continue;
    const std::string stem = e.path().stem().string();
    found.insert(stem);
    auto p = load_hardware_profile(e.path());
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_FALSE(p->name.empty()) << stem;
    for (double v : {p->bf16_tflops, p->hbm_gbps, p->memory_gib, p->nic_gbps, p->pcie_gbps, p->price})
      EXPECT_GT(v, 0) << stem;
    EXPECT_GT(p->gemm_efficiency, 0) << stem;
    EXPECT_LE(p->gemm_efficiency, 1) << stem;
    EXPECT_GT(p->hbm_efficiency, 0) << stem;
    EXPECT_LE(p->hbm_efficiency, 1) << stem;
    if (pcie_only.count(stem)) {
      EXPECT_EQ(p->nvlink_gbps, 0) << stem << " has no NVLink";
    } else {
      EXPECT_GT(p->nvlink_gbps, 0) << stem;
      EXPECT_GT(p->nvlink_gbps, p->nic_gbps) << stem << ": scale-up is faster than the network";
    }
    // Found by stem and by name, case-insensitively.
    for (const std::string& key : {stem, p->name}) {
      std::string upper = key;
      for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      auto by = find_hardware_profile(upper);
      ASSERT_TRUE(by.ok()) << by.status().message();
      EXPECT_EQ(*by, *p) << upper;
    }
  }
  EXPECT_EQ(found, expected);
}

// The numbers that come from MegaScale-Infer Table 3 (prices normalised by L20) and the
// datasheets: a guard against an edit drifting from its cited source.
TEST(HardwareProfiles, ShippedNumbersMatchTheirSources) {
  struct Expect {
    const char* stem;
    double tflops, hbm, memory, price;
  };
  const Expect table[] = {
      {"l20", 119.5, 864, 48, 1.00},       // Table 3
      {"h20", 148, 4096, 96, 1.85},        // Table 3
      {"l40s", 362, 864, 48, 1.08},        // Table 3
      {"a100-80g", 312, 2039, 80, 2.26},   // Table 3 (A800)
      {"h100", 989, 3350, 80, 5.28},       // datasheet; price Table 3 (H800)
      {"h200", 989, 4800, 141, 0},         // datasheet; price derived
      {"a100-40g", 312, 1555, 40, 0},      // datasheet; price derived
      {"t4", 65, 320, 16, 0},              // datasheet (FP16: no BF16); price derived
      {"l4", 121, 300, 24, 0},             // datasheet; price derived
  };
  for (const Expect& e : table) {
    auto p = find_hardware_profile(e.stem);
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_DOUBLE_EQ(p->bf16_tflops, e.tflops) << e.stem;
    EXPECT_DOUBLE_EQ(p->hbm_gbps, e.hbm) << e.stem;
    EXPECT_DOUBLE_EQ(p->memory_gib, e.memory) << e.stem;
    if (e.price > 0) {
      EXPECT_DOUBLE_EQ(p->price, e.price) << e.stem;
    }
  }
  // Derived prices keep the order of the public price lists they come from.
  auto price = [](const char* stem) { return find_hardware_profile(stem)->price; };
  EXPECT_LT(price("t4"), price("l4"));
  EXPECT_LT(price("l4"), price("l20"));
  EXPECT_LT(price("a100-40g"), price("a100-80g"));
  EXPECT_GT(price("h200"), price("h100"));
}

TEST(HardwareProfiles, WriteThenParseRoundTrips) {
  TempDir dir;
  for (const auto& e : fs::directory_iterator(assets_dir() / "hardware")) {
    if (e.path().extension() != ".toml") continue;
    auto p = load_hardware_profile(e.path());
    ASSERT_TRUE(p.ok()) << p.status().message();
    const fs::path copy = dir / e.path().filename().string();
    ASSERT_TRUE(write_hardware_profile(*p, copy).ok());
    auto back = load_hardware_profile(copy);
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, *p) << e.path();
  }
  // Values without a short decimal form, integers, and a name that needs escaping.
  HardwareProfile awkward = *parse_hardware_profile(kGood, "good.toml");
  awkward.name = "Fancy \"GPU\" \\ 2×";
  awkward.bf16_tflops = 0.1 + 0.2;
  awkward.hbm_gbps = 1.0 / 3.0;
  awkward.memory_gib = 1e-300;
  awkward.nic_gbps = 123456789.123456789;
  awkward.gemm_efficiency = std::nextafter(1.0, 0.0);
  awkward.price = 7;
  const fs::path path = dir / "awkward.toml";
  ASSERT_TRUE(write_hardware_profile(awkward, path).ok());
  auto back = load_hardware_profile(path);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << read_file(path);
  EXPECT_EQ(*back, awkward) << read_file(path);
  // Rewriting replaces the file.
  awkward.price = 8;
  ASSERT_TRUE(write_hardware_profile(awkward, path).ok());
  EXPECT_EQ(load_hardware_profile(path)->price, 8);
}

TEST(HardwareProfiles, WriteRefusesAnInvalidProfileAndLeavesTheOldFile) {
  TempDir dir;
  const fs::path path = dir / "p.toml";
  write_file(path, kGood);
  HardwareProfile bad = *parse_hardware_profile(kGood, "good.toml");
  bad.gemm_efficiency = 1.5;
  EXPECT_TRUE(FailsWith(write_hardware_profile(bad, path), {"p.toml", "'gemm_efficiency' is a fraction"}));
  bad.gemm_efficiency = 0.7;
  bad.hbm_gbps = std::nan("");
  EXPECT_TRUE(FailsWith(write_hardware_profile(bad, path), {"p.toml", "'hbm_gbps'"}));
  bad.hbm_gbps = 1;
  bad.name.clear();
  EXPECT_TRUE(FailsWith(write_hardware_profile(bad, path), {"p.toml", "'name'"}));
  EXPECT_EQ(read_file(path), kGood);
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++entries;
  EXPECT_EQ(entries, 1) << "no temporary file is left behind";
  EXPECT_TRUE(FailsWith(write_hardware_profile(*parse_hardware_profile(kGood, "g"), dir / "missing" / "p.toml"),
                        {"cannot write hardware profile", "missing/p.toml"}));
}

TEST(HardwareProfiles, EveryMissingFieldIsNamed) {
  ASSERT_TRUE(parse_hardware_profile(kGood, "good.toml").ok());
  for (const char* key : kKeys) {
    EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line(key, ""), "bad.toml"),
                          {"bad.toml", "missing '" + std::string(key) + "'"}));
  }
}

TEST(HardwareProfiles, BadValuesAreNamedWithFileAndLine) {
  // Unknown key: a typo names itself and the keys there are.
  EXPECT_TRUE(FailsWith(parse_hardware_profile(std::string(kGood) + "warp_size = 32\n", "bad.toml"),
                        {"bad.toml:15", "unknown key 'warp_size'", "hbm_gbps"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("hbm_gbps", "hbm_gbps = -3"), "bad.toml"),
                        {"bad.toml:3", "'hbm_gbps' must be > 0", "-3"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("nic_gbps", "nic_gbps = -50.0"), "bad.toml"),
                        {"bad.toml:7", "'nic_gbps' must be > 0"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("pcie_gbps", "pcie_gbps = 0"), "bad.toml"),
                        {"bad.toml", "'pcie_gbps' must be > 0"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("nvlink_gbps", "nvlink_gbps = -1"), "bad.toml"),
                        {"bad.toml", "'nvlink_gbps' must be >= 0"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("gemm_efficiency", "gemm_efficiency = 1.5"), "bad.toml"),
                        {"bad.toml:11", "'gemm_efficiency' is a fraction in (0, 1]", "1.5"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("hbm_efficiency", "hbm_efficiency = 0"), "bad.toml"),
                        {"bad.toml", "'hbm_efficiency' must be > 0"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("price", "price = inf"), "bad.toml"),
                        {"bad.toml", "'price' must be a finite number"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("bf16_tflops", "bf16_tflops = \"fast\""), "bad.toml"),
                        {"bad.toml:2", "'bf16_tflops' must be a number"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("bf16_tflops", "bf16_tflops = true"), "bad.toml"),
                        {"bad.toml:2", "'bf16_tflops' must be a number"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(with_line("name", "name = 3"), "bad.toml"),
                        {"bad.toml:1", "'name' must be a non-empty string"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile("name = [", "bad.toml"), {"bad.toml:1"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(std::string(kGood) + "price = 2\n", "bad.toml"), {"bad.toml:15"}));
  // Zero is allowed where it means "none": no NVLink, no fixed cost.
  EXPECT_TRUE(parse_hardware_profile(with_line("kernel_overhead_us", "kernel_overhead_us = 0"), "ok.toml").ok());
}

TEST(HardwareProfiles, LoadNamesTheFile) {
  TempDir dir;
  const fs::path path = dir / "mine.toml";
  write_file(path, with_line("memory_gib", "memory_gib = -1"));
  EXPECT_TRUE(FailsWith(load_hardware_profile(path), {path.string() + ":4", "'memory_gib' must be > 0"}));
  EXPECT_TRUE(FailsWith(load_hardware_profile(dir / "absent.toml"), {"absent.toml", "does not exist"}));
  // A path works wherever a name does.
  write_file(path, kGood);
  auto p = find_hardware_profile(path.string());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->name, "X");
  EXPECT_TRUE(FailsWith(find_hardware_profile((dir / "nope.toml").string()), {"nope.toml", "does not exist"}));
}

// FinDEP's testbeds (A6000, A10, H20) carry α + β·x models derived from their roofline; the
// shipped numbers are what findep_primitives_from_roofline gives (regenerate them with
// `switchyard calibrate --findep-from-roofline NAME`).
TEST(HardwareProfiles, FindepTestbedsCarryTheirRooflineModels) {
  for (const char* name : {"a6000", "a10", "h20"}) {
    auto p = find_hardware_profile(name);
    ASSERT_TRUE(p.ok()) << p.status().message();
    ASSERT_TRUE(p->findep.has_value()) << name;
    HardwareProfile plain = *p;
    plain.findep.reset();
    const FindepPrimitives derived = findep_primitives_from_roofline(plain);
    for (auto [got, want] : {std::pair{p->findep->gemm, derived.gemm}, std::pair{p->findep->attention, derived.attention},
                             std::pair{p->findep->comm, derived.comm}}) {
      EXPECT_NEAR(got.alpha_us, want.alpha_us, 1e-6 * std::max(1.0, want.alpha_us)) << name;
      EXPECT_NEAR(got.beta_us, want.beta_us, 1e-6 * want.beta_us) << name;
    }
  }
}

TEST(HardwareProfiles, FindepTableIsCheckedAndWrittenBack) {
  const std::string good = std::string(kGood) +
                           "\n[findep]\ngemm_alpha_us = 5.0\ngemm_beta_us = 1e-11\nattention_alpha_us = 5\n"
                           "attention_beta_us = 2e-11\ncomm_alpha_us = 3.0\ncomm_beta_us = 2e-6\n";
  auto p = parse_hardware_profile(good, "f.toml");
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_TRUE(p->findep.has_value());
  EXPECT_EQ(p->findep->gemm.beta_us, 1e-11);
  EXPECT_EQ(p->findep->attention.alpha_us, 5.0);
  EXPECT_EQ(p->findep->comm.beta_us, 2e-6);
  TempDir dir;
  ASSERT_TRUE(write_hardware_profile(*p, dir / "w.toml").ok());
  auto back = load_hardware_profile(dir / "w.toml");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, *p);

  std::string missing = good.substr(0, good.find("comm_beta_us"));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(missing, "f.toml"), {"f.toml", "missing 'findep.comm_beta_us'"}));
  std::string negative = good;
  negative.replace(negative.find("= 3.0"), 5, "= -3.0");
  EXPECT_TRUE(FailsWith(parse_hardware_profile(negative, "f.toml"), {"f.toml:", "'findep.comm_alpha_us' must be"}));
  EXPECT_TRUE(FailsWith(parse_hardware_profile(good + "gemm_gamma = 1\n", "f.toml"),
                        {"f.toml:", "unknown key 'findep.gemm_gamma'"}));
}

TEST(HardwareProfiles, UnknownNameListsTheAvailableProfiles) {
  auto p = find_hardware_profile("b200");
  ASSERT_FALSE(p.ok());
  for (const char* name : {"'b200'", "a100-40g", "a100-80g", "h100", "h200", "h20", "l40s", "l20", "t4", "l4"})
    EXPECT_NE(p.status().message().find(name), std::string::npos) << name << " in " << p.status().message();
}

TEST(HardwareProfiles, FindSearchesTheAssetsDirectoryOfTheEnvironment) {
  TempDir dir;
  fs::create_directories(dir / "hardware");
  write_file(dir.path() / "hardware" / "mine.toml", with_line("name", "name = \"My-GPU\""));
  write_file(dir.path() / "hardware" / "broken.toml", with_line("price", ""));
  ScopedEnv env("SWITCHYARD_ASSETS", dir.path().string());
  auto by_stem = find_hardware_profile("MINE");
  ASSERT_TRUE(by_stem.ok()) << by_stem.status().message();
  auto by_name = find_hardware_profile("my-gpu");
  ASSERT_TRUE(by_name.ok()) << by_name.status().message();
  EXPECT_EQ(by_name->name, "My-GPU");
  // A broken profile does not hide the others, and the error says why it was skipped.
  EXPECT_TRUE(FailsWith(find_hardware_profile("h100"),
                        {"unknown hardware profile 'h100'", "available: mine (My-GPU)", "broken.toml",
                         "missing 'price'"}));
  EXPECT_TRUE(FailsWith(find_hardware_profile("broken"), {"broken.toml", "missing 'price'"}));
}

}  // namespace
}  // namespace sy
