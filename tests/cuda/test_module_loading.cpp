// CUDA_MODULE_LOADING=EAGER for a rank under a launcher (backend_options.h): set only for a world
// above 1 and only where the environment says nothing, and, on a GPU, in effect when set before
// CUDA starts (a fresh process of this binary asks the driver, cuModuleGetLoadingMode).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/cli/backend_options.h"
#include "kernels/cuda/kernel_preload.h"
#include "tests/cuda/gpu_skips.h"
#include "tests/support/shell_run.h"

namespace sy {
namespace {

// Sets (or, with nullopt, unsets) variables for one test and puts back what was there.
class ScopedEnv {
 public:
  void set(const char* name, std::optional<std::string> value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old ? std::optional<std::string>(old) : std::nullopt});
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// No launcher's variables but RANK and WORLD_SIZE, as given.
void launcher(ScopedEnv& env, std::optional<std::string> world) {
  for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_PROCID",
                        "SLURM_NTASKS", "SLURM_LOCALID", "LOCAL_RANK"})
    env.set(v, std::nullopt);
  env.set("RANK", world ? std::optional<std::string>("0") : std::nullopt);
  env.set("WORLD_SIZE", world);
}

std::string loading() {
  const char* v = std::getenv("CUDA_MODULE_LOADING");
  return v ? v : "(unset)";
}

TEST(ModuleLoadingUnderALauncher, ARankOfSeveralLoadsEagerly) {
  ScopedEnv env;
  launcher(env, "3");
  env.set("CUDA_MODULE_LOADING", std::nullopt);
  cli::load_cuda_modules_eagerly_under_launcher();
  EXPECT_EQ(loading(), "EAGER");
}

TEST(ModuleLoadingUnderALauncher, WhatTheEnvironmentSaysStays) {
  ScopedEnv env;
  launcher(env, "3");
  env.set("CUDA_MODULE_LOADING", "LAZY");
  cli::load_cuda_modules_eagerly_under_launcher();
  EXPECT_EQ(loading(), "LAZY");
}

TEST(ModuleLoadingUnderALauncher, OneProcessKeepsCudasDefault) {
  for (const std::optional<std::string>& world : {std::optional<std::string>(), std::optional<std::string>("1")}) {
    ScopedEnv env;
    launcher(env, world);
    env.set("CUDA_MODULE_LOADING", std::nullopt);
    cli::load_cuda_modules_eagerly_under_launcher();
    EXPECT_EQ(loading(), "(unset)") << "WORLD_SIZE " << world.value_or("unset");
  }
}

// Run by the next test in a process of its own: sets the variable as switchyard's main does,
// then asks the driver which mode it runs in.
TEST(ModuleLoadingUnderALauncher, ChildReportsTheDriversMode) {
  if (!std::getenv("SY_MODULE_LOADING_CHILD")) GTEST_SKIP() << "run in a process of its own by TakesEffectBeforeCudaStarts";
  cli::load_cuda_modules_eagerly_under_launcher();  // before any CUDA call of this process
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const auto lazy = kernels::lazy_module_loading();
  ASSERT_TRUE(lazy.ok()) << lazy.status().message();
  std::printf("module loading: %s\n", *lazy ? "lazy" : "eager");
}

TEST(ModuleLoadingUnderALauncher, TakesEffectBeforeCudaStarts) {
  SKIP_WITHOUT_GPU();
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  ASSERT_FALSE(ec) << ec.message();
  const std::string child = "env -u CUDA_MODULE_LOADING -u OMPI_COMM_WORLD_SIZE -u SLURM_NTASKS ";
  const std::string run = " " + self.string() + " --gtest_filter=ModuleLoadingUnderALauncher.ChildReportsTheDriversMode";
  // One process alone keeps CUDA's default, lazy since 12.2 on Linux; a rank of two loads eagerly.
  const test::ShellRun alone = test::shell(child + "-u RANK -u WORLD_SIZE SY_MODULE_LOADING_CHILD=1" + run + " 2>&1");
  EXPECT_EQ(alone.exit_code, 0) << alone.output;
  EXPECT_NE(alone.output.find("module loading: lazy"), std::string::npos) << alone.output;
  const test::ShellRun rank = test::shell(child + "SY_MODULE_LOADING_CHILD=1 RANK=1 WORLD_SIZE=2" + run + " 2>&1");
  EXPECT_EQ(rank.exit_code, 0) << rank.output;
  EXPECT_NE(rank.output.find("module loading: eager"), std::string::npos) << rank.output;
}

}  // namespace
}  // namespace sy
