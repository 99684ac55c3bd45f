// Validators of numeric options whose errors say what is wrong with the value.
#pragma once

#include <CLI/CLI.hpp>

namespace sy::cli {

// CLI11 2.1's PositiveNumber and NonNegativeNumber call text that is not a number "not in
// range", and print their bounds as 0.000000 (PositiveNumber refuses 0) and the largest double
// written out (330 digits). These name the value and the rule: a finite number above 0, or at
// least 0.
const CLI::Validator& positive_number();
const CLI::Validator& non_negative_number();

}  // namespace sy::cli
