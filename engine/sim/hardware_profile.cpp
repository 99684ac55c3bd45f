#include "engine/sim/hardware_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include <toml++/toml.h>

namespace sy {
namespace {

struct Field {
  const char* key;
  double HardwareProfile::*member;
  bool may_be_zero;
  bool fraction;  // in (0, 1]
};

constexpr Field kFields[] = {
    {"bf16_tflops", &HardwareProfile::bf16_tflops, false, false},
    {"hbm_gbps", &HardwareProfile::hbm_gbps, false, false},
    {"memory_gib", &HardwareProfile::memory_gib, false, false},
    {"nvlink_gbps", &HardwareProfile::nvlink_gbps, true, false},
    {"nvlink_latency_us", &HardwareProfile::nvlink_latency_us, true, false},
    {"nic_gbps", &HardwareProfile::nic_gbps, false, false},
    {"nic_latency_us", &HardwareProfile::nic_latency_us, true, false},
    {"pcie_gbps", &HardwareProfile::pcie_gbps, false, false},
    {"price", &HardwareProfile::price, false, false},
    {"gemm_efficiency", &HardwareProfile::gemm_efficiency, false, true},
    {"gemm_half_tokens", &HardwareProfile::gemm_half_tokens, true, false},
    {"hbm_efficiency", &HardwareProfile::hbm_efficiency, false, true},
    {"kernel_overhead_us", &HardwareProfile::kernel_overhead_us, true, false},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

StatusOr<HardwareProfile> parse_hardware_profile(std::string_view text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return Status::Error(source + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  HardwareProfile p;
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    const auto line = std::to_string(node.source().begin.line);
    if (k == "name") {
      const auto v = node.value<std::string>();
      if (!v || v->empty()) return Status::Error(source + ":" + line + ": 'name' must be a non-empty string");
      p.name = *v;
      continue;
    }
    const Field* f = nullptr;
    for (const Field& cand : kFields)
      if (k == cand.key) f = &cand;
    if (!f) return Status::Error(source + ":" + line + ": unknown key '" + k + "'");
    const auto v = node.value<double>();
    if (!v || !std::isfinite(*v)) return Status::Error(source + ":" + line + ": '" + k + "' must be a number");
    if (*v < 0 || (*v == 0 && !f->may_be_zero))
      return Status::Error(source + ":" + line + ": '" + k + "' must be " + (f->may_be_zero ? ">= 0" : "> 0") +
                           ", got " + std::to_string(*v));
    if (f->fraction && *v > 1)
      return Status::Error(source + ":" + line + ": '" + k + "' is a fraction in (0, 1], got " + std::to_string(*v));
    p.*(f->member) = *v;
  }
  if (p.name.empty()) return Status::Error(source + ": missing 'name'");
  for (const Field& f : kFields)
    if (!root.contains(f.key)) return Status::Error(source + ": missing '" + f.key + "'");
  return p;
}

StatusOr<HardwareProfile> load_hardware_profile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open hardware profile " + path.string() + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_hardware_profile(ss.str(), path.string());
}

Status write_hardware_profile(const HardwareProfile& p, const std::filesystem::path& path) {
  std::ostringstream out;
  out.precision(17);
  out << "name = " << toml::value<std::string>(p.name) << "\n";
  for (const Field& f : kFields) out << f.key << " = " << toml::value<double>(p.*(f.member)) << "\n";
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary);
    f << out.str();
    if (!f) return Status::Error("cannot write hardware profile " + path.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return Status::Error("cannot write hardware profile " + path.string() + ": " + ec.message());
  }
  return Status::Ok();
}

std::filesystem::path assets_dir() {
  if (const char* env = std::getenv("SWITCHYARD_ASSETS"); env && *env) return env;
  return SY_ASSETS_DIR;
}

StatusOr<HardwareProfile> find_hardware_profile(const std::string& name_or_path) {
  const std::filesystem::path direct(name_or_path);
  if (direct.extension() == ".toml" || std::filesystem::is_regular_file(direct)) return load_hardware_profile(direct);
  const std::filesystem::path dir = assets_dir() / "hardware";
  const std::string wanted = lower(name_or_path);
  std::vector<std::string> names;
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    auto p = load_hardware_profile(f);
    if (!p.ok()) return p.status();
    if (lower(f.stem().string()) == wanted || lower(p->name) == wanted) return p;
    names.push_back(f.stem().string());
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  return Status::Error("unknown hardware profile '" + name_or_path + "' (in " + dir.string() + ": " +
                       (list.empty() ? "none" : list) + ")");
}

}  // namespace sy
