#include "engine/cli/number_validators.h"

#include <cmath>
#include <string>

namespace sy::cli {

namespace {

CLI::Validator finite_number(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not a number";
        if (!std::isfinite(value)) return "'" + text + "' is not a finite number";
        if (zero_allowed && value < 0) return text + " is below 0 (0 or more)";
        if (!zero_allowed && value <= 0) return text + " is not above 0";
        return {};
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

const CLI::Validator& positive_number() {
  static const CLI::Validator v = finite_number(false);
  return v;
}

const CLI::Validator& non_negative_number() {
  static const CLI::Validator v = finite_number(true);
  return v;
}

}  // namespace sy::cli
