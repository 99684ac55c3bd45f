// `switchyard`: the engine's command-line entry point.
#include <cstdio>
#include <exception>
#include <thread>

#include <CLI/CLI.hpp>

#include "engine/cli/backend_options.h"
#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/cli/required_options.h"
#include "kernels/cpu/gemm.h"

int main(int argc, char** argv) {
  // First, before any command can start CUDA (a rank's NCCL links: backend_options.h).
  sy::cli::load_cuda_modules_eagerly_under_launcher();
  CLI::App app{"Switchyard: a Mixture-of-Experts serving engine", "switchyard"};
  app.require_subcommand(1);
  // Global options are accepted after the subcommand too (`switchyard bench --threads 1 …`):
  // a subcommand hands the options it does not know to the app.
  app.fallthrough();
  app.set_version_flag("--version", "switchyard 0.1.0");
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  app.add_option("--threads", threads, "CPU threads for the math kernels")->capture_default_str()
      ->check(CLI::Range(1, 1024))->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  bool check_weights = false;
  app.add_flag("--check-weights", check_weights,
               "Search every weight the model uses for NaN and ±inf when loading it (by default a sample of each tensor)");
  sy::cli::RequiredOptions required;
  // Runs before any command does: every missing option is named at once.
  app.parse_complete_callback([&] {
    required.check(app);
    sy::kernels::set_num_threads(threads);
    if (check_weights) sy::cli::weight_check() = sy::WeightCheck::Full;
  });

  sy::cli::register_make_model(app);
  sy::cli::register_logits(app);
  sy::cli::register_generate(app);
  sy::cli::register_demo(app);
  sy::cli::register_serve(app);
  sy::cli::register_bench(app);
  sy::cli::register_reproduce(app);
  sy::cli::register_calibrate(app);
  sy::cli::register_trace(app);
  sy::cli::register_keys(app);
  sy::cli::register_plan(app);
  required.gather(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const sy::cli::CommandError& e) {
    const auto subs = app.get_subcommands();
    std::fprintf(stderr, "switchyard %s: error: %s\n", subs.empty() ? "" : subs.front()->get_name().c_str(),
                 e.message.c_str());
    return e.exit_code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "switchyard: internal error: %s\n", e.what());
    return 70;
  }
  return 0;
}
