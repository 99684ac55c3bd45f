#include "engine/cli/required_options.h"

#include <string>

namespace sy::cli {

void RequiredOptions::gather(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands({})) {
    for (CLI::Option* opt : sub->get_options()) {
      if (!opt->get_required()) continue;
      opt->required(false);
      required_[sub].push_back(opt);
    }
    gather(*sub);
  }
}

void RequiredOptions::check(const CLI::App& app) const {
  for (const CLI::App* sub : app.get_subcommands()) {
    const auto found = required_.find(sub);
    if (found != required_.end()) {
      std::string missing;
      int n = 0;
      for (const CLI::Option* opt : found->second) {
        if (opt->count() > 0) continue;
        missing += (n++ ? ", " : "") + opt->get_name();
      }
      if (n > 0) throw CLI::RequiredError(missing + (n > 1 ? " are required" : " is required"), CLI::ExitCodes::RequiredError);
    }
    check(*sub);
  }
}

}  // namespace sy::cli
