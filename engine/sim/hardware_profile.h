// A device profile for the simulator and planner: peak compute, memory and link speeds, price,
// and the efficiency curve of its GEMMs. Stored as TOML in assets/hardware/.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "engine/sim/findep_model.h"
#include "engine/util/assets.h"  // assets_dir(), where the profiles are

namespace sy {

struct HardwareProfile {
  std::string name;
  double bf16_tflops = 0;         // dense peak
  double hbm_gbps = 0;            // memory bandwidth, GB/s
  double memory_gib = 0;
  double nvlink_gbps = 0;         // per-device scale-up bandwidth (one direction), 0: none (PCIe)
  double nvlink_latency_us = 0;
  double nic_gbps = 0;            // per-device network bandwidth, GB/s
  double nic_latency_us = 0;
  double pcie_gbps = 0;
  double price = 0;               // relative price
  double gemm_efficiency = 0;     // fraction of peak reached by large GEMMs, (0, 1]
  double gemm_half_tokens = 0;    // rows at which a GEMM reaches half that efficiency
  double hbm_efficiency = 0;      // achievable fraction of hbm_gbps, (0, 1]
  double kernel_overhead_us = 0;  // fixed cost per kernel
  // FinDEP's α + β·x models of this device (optional [findep] table): fitted by `switchyard
  // calibrate`, or for the papers' GPUs derived from the roofline above.
  std::optional<FindepPrimitives> findep;

  bool operator==(const HardwareProfile&) const = default;
};

StatusOr<HardwareProfile> parse_hardware_profile(std::string_view toml_text, const std::string& source);
StatusOr<HardwareProfile> load_hardware_profile(const std::filesystem::path& path);
// Writes a file parse_hardware_profile() reads back equal; replaces `path` atomically.
Status write_hardware_profile(const HardwareProfile& profile, const std::filesystem::path& path);
// A .toml path, or a name matched (case-insensitively) against the file stems and `name`
// fields of assets_dir()/hardware; the error lists the names there are.
StatusOr<HardwareProfile> find_hardware_profile(const std::string& name_or_path);

}  // namespace sy
