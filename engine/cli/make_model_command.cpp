// `switchyard make-model`: writes a random model in Hugging Face layout.
#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/model/random_model.h"
#include "engine/text/model_tokenizer.h"
#include "engine/util/progress.h"

namespace sy::cli {
namespace {

struct MakeModelArgs {
  std::string arch = "mixtral";
  std::string preset = "tiny";
  std::uint64_t seed = 0;
  std::string dtype = "bf16";
  std::filesystem::path out;
};

void run(const MakeModelArgs& a) {
  const Arch arch = take(parse_arch(a.arch));
  const ModelPreset preset = take(parse_preset(a.preset));
  const kernels::DType dtype = a.dtype == "f32" ? kernels::DType::F32 : kernels::DType::BF16;
  ModelConfig config = preset_config(arch, preset, dtype);
  // The family's small tokenizer, with the config's bos/eos ids made to agree with it.
  const std::vector<ModelFile> tokenizer_files = take(text::model_tokenizer_files(config));
  Progress progress("make-model: writing weights", 0, "B");
  check(write_random_model(config, a.seed, a.out, 2ull << 30, tokenizer_files,
                           [&](std::uint64_t done, std::uint64_t total) {
                             progress.set_total(static_cast<std::int64_t>(total));
                             progress.update(static_cast<std::int64_t>(done));
                           }));
  progress.finish();
  const double params = static_cast<double>(config.parameter_count());
  std::printf("wrote %s %s model (%.1f M parameters, %s, seed %llu) to %s\n", a.arch.c_str(),
              a.preset.c_str(), params / 1e6, a.dtype.c_str(), static_cast<unsigned long long>(a.seed),
              a.out.string().c_str());
}

}  // namespace

void register_make_model(CLI::App& app) {
  auto args = std::make_shared<MakeModelArgs>();
  CLI::App* sub = app.add_subcommand("make-model", "Write a randomly initialised model (Hugging Face layout)");
  sub->add_option("--arch", args->arch, "Architecture")
      ->check(CLI::IsMember({"mixtral", "qwen2_moe", "qwen3_moe", "olmoe"}))->capture_default_str();
  sub->add_option("--preset", args->preset, "Size: tiny (a few MB) or small (0.3-0.7 B parameters)")
      ->check(CLI::IsMember({"tiny", "small"}))->capture_default_str();
  sub->add_option("--seed", args->seed, "Random seed")->capture_default_str();
  sub->add_option("--dtype", args->dtype, "Weight type")->check(CLI::IsMember({"bf16", "f32"}))
      ->capture_default_str();
  sub->add_option("--out", args->out, "Output directory (must not exist or be empty)")->required();
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
