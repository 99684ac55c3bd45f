// The list of kernels loaded before NCCL links carry rows (kernel_preload.h): it names every
// kernel the sources of kernels/cuda define (checked here without a GPU), and on a GPU every
// one of them is loaded afterwards, as the driver says (cuFuncIsLoaded).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

namespace fs = std::filesystem;

// kernels/cuda beside the sources this test was built from, else under the working directory
// (the GPU machine runs the bundle from a copy of the repository).
fs::path kernel_sources() {
  for (const fs::path& root : {fs::path(SY_SOURCE_DIR), fs::current_path()})
    if (fs::is_regular_file(root / "kernels/cuda/kernel_preload.h")) return root / "kernels/cuda";
  return {};
}

// [file stem]: the names of the __global__ functions defined in kernels/cuda/*.cu and *.cuh.
std::map<std::string, std::set<std::string>> kernels_in_sources(const fs::path& dir) {
  // `__global__ void [__launch_bounds__(...)] name(`, across line breaks.
  const std::regex kernel(R"(__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\()");
  std::map<std::string, std::set<std::string>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cu" && ext != ".cuh") continue;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (auto it = std::sregex_iterator(s.begin(), s.end(), kernel); it != std::sregex_iterator(); ++it)
      out[e.path().stem().string()].insert((*it)[1].str());
  }
  return out;
}

std::string base_name(const std::string& entry) { return entry.substr(0, entry.find('<')); }

TEST(KernelPreload, ListsEveryKernelTheSourcesDefine) {
  const fs::path dir = kernel_sources();
  if (dir.empty()) GTEST_SKIP() << "the sources of kernels/cuda are not here (" << SY_SOURCE_DIR << ")";
  const auto defined = kernels_in_sources(dir);
  std::size_t count = 0;
  for (const auto& [file, names] : defined) count += names.size();
  ASSERT_GE(count, 20u) << "the pattern no longer finds the kernels of " << dir;

  const std::vector<KernelEntry> entries = registered_kernels();
  std::multiset<std::string> listed;
  std::set<const void*> symbols;
  for (const KernelEntry& k : entries) {
    listed.insert(base_name(k.name));
    EXPECT_TRUE(symbols.insert(k.symbol).second) << k.name << " is listed twice";
  }
  // Two files may each define a private kernel of one name (scale_rows_kernel): count them.
  std::multiset<std::string> wanted;
  for (const auto& [file, names] : defined)
    for (const std::string& n : names) wanted.insert(n);
  for (const std::string& n : std::set<std::string>(wanted.begin(), wanted.end()))
    EXPECT_GE(listed.count(n), wanted.count(n)) << "kernel " << n << " (kernels/cuda) is not in registered_kernels(): "
                                                << "its first launch amid NCCL transfers would load it lazily";
  for (const std::string& n : std::set<std::string>(listed.begin(), listed.end()))
    EXPECT_TRUE(wanted.count(n)) << n << " is listed but no source defines it";
}

TEST(KernelPreload, TheSmallMKernelsAreListedForEveryTileAndWeightType) {
  std::set<std::string> small_m, dense;
  for (const KernelEntry& k : registered_kernels()) {
    if (base_name(k.name) == "small_m_kernel") small_m.insert(k.name);
    if (base_name(k.name) == "small_m_dense_kernel") dense.insert(k.name);
  }
  // launch_type's and launch_dense_type's m tiles (1..16, kSmallMPieceRows) times BF16, F16, F32.
  EXPECT_EQ(small_m.size(), 15u);
  EXPECT_EQ(dense.size(), 15u);
}

TEST(KernelPreload, LoadsEveryKernelOnTheDevice) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << cuda_device_problem();
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);  // the context
  const auto lazy = lazy_module_loading();
  ASSERT_TRUE(lazy.ok()) << lazy.status().message();
  int unloaded_before = 0;
  for (const KernelEntry& k : registered_kernels()) {
    const auto loaded = kernel_loaded(k.symbol);
    ASSERT_TRUE(loaded.ok()) << k.name << ": " << loaded.status().message();
    unloaded_before += *loaded ? 0 : 1;
  }
  // In a fresh process with lazy loading, none of them is loaded yet (informational: other
  // tests of this process may have launched some).
  std::printf("module loading %s; %d of %zu kernels unloaded before preload_kernels\n", *lazy ? "lazy" : "eager",
              unloaded_before, registered_kernels().size());
  const Status s = preload_kernels();
  ASSERT_TRUE(s.ok()) << s.message();
  for (const KernelEntry& k : registered_kernels()) {
    const auto loaded = kernel_loaded(k.symbol);
    ASSERT_TRUE(loaded.ok()) << k.name << ": " << loaded.status().message();
    EXPECT_TRUE(*loaded) << k.name << " is not loaded after preload_kernels";
  }
}

}  // namespace
}  // namespace sy::kernels
