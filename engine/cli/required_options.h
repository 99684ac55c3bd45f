// Lets a command report every required option that is missing in one message ("--arch,
// --out are required"), where CLI11 stops at the first.
#pragma once

#include <map>
#include <vector>

#include <CLI/CLI.hpp>

namespace sy::cli {

class RequiredOptions {
 public:
  // Takes over the `required` mark of every subcommand's options (call once they are all
  // registered).
  void gather(CLI::App& app);
  // Throws CLI::RequiredError naming all the missing options of the chosen subcommands. Call
  // when parsing is complete, before the commands run (the app's parse_complete_callback).
  void check(const CLI::App& app) const;

 private:
  std::map<const CLI::App*, std::vector<const CLI::Option*>> required_;
};

}  // namespace sy::cli
