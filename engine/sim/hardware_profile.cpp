// Reads, validates and writes the TOML device profiles of assets/hardware/ (format:
// assets/hardware/README.md). Strict like the layout parser: every key required, unknown keys
// refused, each message naming the file and, where there is one, the line.
#include "engine/sim/hardware_profile.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include <toml++/toml.h>

namespace sy {
namespace {

namespace fs = std::filesystem;

// Every numeric key, in the order the writer emits them.
struct Field {
  const char* key;
  double HardwareProfile::*member;
  bool may_be_zero;  // 0 is meaningful (no NVLink, no fixed cost); negative never is
  bool fraction;     // in (0, 1]
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

// The [findep] table: α (µs) and β (µs per FLOP, per attention unit, per byte) of each model.
struct FindepField {
  const char* key;
  LinearCost FindepPrimitives::*model;
  double LinearCost::*member;
};

constexpr FindepField kFindepFields[] = {
    {"gemm_alpha_us", &FindepPrimitives::gemm, &LinearCost::alpha_us},
    {"gemm_beta_us", &FindepPrimitives::gemm, &LinearCost::beta_us},
    {"attention_alpha_us", &FindepPrimitives::attention, &LinearCost::alpha_us},
    {"attention_beta_us", &FindepPrimitives::attention, &LinearCost::beta_us},
    {"comm_alpha_us", &FindepPrimitives::comm, &LinearCost::alpha_us},
    {"comm_beta_us", &FindepPrimitives::comm, &LinearCost::beta_us},
};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string known_keys() {
  std::string out = "name";
  for (const Field& f : kFields) out += std::string(", ") + f.key;
  return out + ", [findep]";
}

// A double as TOML writes it back exactly: the shortest decimal form that reads back as the
// same value, always with a '.' or exponent so that it stays a float.
std::string format_double(double v) {
  std::ostringstream out;
  out << toml::value<double>(v);
  return out.str();
}

std::string render(const HardwareProfile& p) {
  std::string out = "name = ";
  {
    std::ostringstream name;
    name << toml::value<std::string>(p.name);
    out += name.str();
  }
  out += "\n";
  for (const Field& f : kFields) out += std::string(f.key) + " = " + format_double(p.*(f.member)) + "\n";
  if (p.findep) {
    out += "\n[findep]\n";
    for (const FindepField& f : kFindepFields)
      out += std::string(f.key) + " = " + format_double((*p.findep).*(f.model).*(f.member)) + "\n";
  }
  return out;
}

Status parse_findep_table(const toml::node& node, const std::string& source, FindepPrimitives& out) {
  const std::string where = source + ":" + std::to_string(node.source().begin.line);
  const toml::table* t = node.as_table();
  if (!t) return Status::Error(where + ": 'findep' must be a [findep] table");
  std::string known;
  for (const FindepField& f : kFindepFields) known += (known.empty() ? "" : ", ") + std::string(f.key);
  for (const auto& [key, value] : *t) {
    const std::string k(key.str());
    const std::string at = source + ":" + std::to_string(value.source().begin.line);
    const FindepField* f = nullptr;
    for (const FindepField& cand : kFindepFields)
      if (k == cand.key) f = &cand;
    if (!f) return Status::Error(at + ": unknown key 'findep." + k + "' (known keys: " + known + ")");
    if (!value.is_integer() && !value.is_floating_point()) return Status::Error(at + ": 'findep." + k + "' must be a number");
    const double v = *value.value<double>();
    if (!std::isfinite(v) || v < 0)
      return Status::Error(at + ": 'findep." + k + "' must be a finite number >= 0, got " + format_double(v));
    out.*(f->model).*(f->member) = v;
  }
  for (const FindepField& f : kFindepFields)
    if (!t->contains(f.key)) return Status::Error(where + ": missing 'findep." + std::string(f.key) + "'");
  return Status::Ok();
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
  bool has_name = false;
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    const std::string where = source + ":" + std::to_string(node.source().begin.line);
    if (k == "name") {
      const auto v = node.value_exact<std::string>();
      if (!v || v->empty()) return Status::Error(where + ": 'name' must be a non-empty string");
      p.name = *v;
      has_name = true;
      continue;
    }
    if (k == "findep") {
      FindepPrimitives f;
      SY_RETURN_IF_ERROR(parse_findep_table(node, source, f));
      p.findep = f;
      continue;
    }
    const Field* f = nullptr;
    for (const Field& cand : kFields)
      if (k == cand.key) f = &cand;
    if (!f) return Status::Error(where + ": unknown key '" + k + "' (known keys: " + known_keys() + ")");
    // Integers are accepted where floats are meant (bf16_tflops = 989); booleans and strings are not.
    if (!node.is_integer() && !node.is_floating_point())
      return Status::Error(where + ": '" + k + "' must be a number");
    const double v = *node.value<double>();
    if (!std::isfinite(v)) return Status::Error(where + ": '" + k + "' must be a finite number");
    if (v < 0 || (v == 0 && !f->may_be_zero))
      return Status::Error(where + ": '" + k + "' must be " + (f->may_be_zero ? ">= 0" : "> 0") + ", got " +
                           format_double(v));
    if (f->fraction && v > 1)
      return Status::Error(where + ": '" + k + "' is a fraction in (0, 1], got " + format_double(v));
    p.*(f->member) = v;
  }
  if (!has_name) return Status::Error(source + ": missing 'name'");
  for (const Field& f : kFields)
    if (!root.contains(f.key)) return Status::Error(source + ": missing '" + f.key + "'");
  return p;
}

StatusOr<HardwareProfile> load_hardware_profile(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Status::Error("hardware profile " + path.string() + " does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open hardware profile " + path.string() + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::Error("cannot read hardware profile " + path.string());
  return parse_hardware_profile(ss.str(), path.string());
}

Status write_hardware_profile(const HardwareProfile& p, const fs::path& path) {
  // What is written must read back as this very profile: a profile that would not validate (or
  // would lose precision) is refused here rather than discovered at the next load.
  const std::string text = render(p);
  auto back = parse_hardware_profile(text, path.string());
  if (!back.ok()) return Status::Error("refusing to write an invalid hardware profile: " + back.status().message());
  if (!(*back == p)) return Status::Error("hardware profile " + path.string() + " would not read back unchanged");

  // A unique sibling, renamed over the target: readers see the old file or the new one, never a
  // partial one, and a failure leaves no temporary behind.
  static std::atomic<unsigned> counter{0};
  fs::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter.fetch_add(1));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status::Error("cannot write hardware profile " + path.string() + ": " + std::strerror(errno));
    f << text;
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return Status::Error("cannot write hardware profile " + path.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return Status::Error("cannot write hardware profile " + path.string() + ": " + ec.message());
  }
  return Status::Ok();
}

StatusOr<HardwareProfile> find_hardware_profile(const std::string& name_or_path) {
  const fs::path direct(name_or_path);
  std::error_code ec;
  if (direct.extension() == ".toml" || fs::is_regular_file(direct, ec)) return load_hardware_profile(direct);

  const fs::path dir = assets_dir() / "hardware";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const std::string wanted = lower(name_or_path);

  // The file stem first: it needs no parsing, so one broken profile cannot hide another.
  for (const fs::path& f : files)
    if (lower(f.stem().string()) == wanted) return load_hardware_profile(f);

  std::vector<std::string> names;
  std::vector<std::string> broken;
  for (const fs::path& f : files) {
    auto p = load_hardware_profile(f);
    if (!p.ok()) {
      broken.push_back(p.status().message());
      continue;
    }
    if (lower(p->name) == wanted) return p;
    std::string label = f.stem().string();
    if (lower(p->name) != lower(label)) label += " (" + p->name + ")";
    names.push_back(label);
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  std::string message = "unknown hardware profile '" + name_or_path + "': not a .toml file, and no profile in " +
                        dir.string() + " has that file name or name (available: " +
                        (list.empty() ? "none" : list) + ")";
  for (const auto& b : broken) message += "; skipped " + b;
  return Status::Error(message);
}

}  // namespace sy
