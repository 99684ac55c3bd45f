// The subcommands of the `switchyard` executable: each registers its flags and its action.
#pragma once

#include <CLI/CLI.hpp>

namespace sy::cli {

void register_make_model(CLI::App& app);
void register_logits(CLI::App& app);
void register_generate(CLI::App& app);
void register_demo(CLI::App& app);
void register_serve(CLI::App& app);
void register_bench(CLI::App& app);
void register_reproduce(CLI::App& app);
void register_calibrate(CLI::App& app);
void register_trace(CLI::App& app);
void register_keys(CLI::App& app);
void register_plan(CLI::App& app);

}  // namespace sy::cli
