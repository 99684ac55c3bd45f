// Helpers shared by the CLI commands: argument parsing and error reporting.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model/model_weights.h"

namespace sy::cli {

// Thrown by a command to end the program with a message and a non-zero exit code; main()
// prints "switchyard <command>: error: <message>".
struct CommandError {
  std::string message;
  int exit_code = 1;
};

// Raises CommandError when the status is an error.
void check(const Status& status);
template <class T>
T take(StatusOr<T> result) {
  check(result.status());
  return std::move(result).value();
}

// "1,2,3" -> {1,2,3}; an empty list or a non-integer element is an error naming it.
StatusOr<std::vector<std::int32_t>> parse_token_list(const std::string& text);

// Loads a model directory, raising CommandError with the loader's message.
std::shared_ptr<const ModelWeights> load_model(const std::filesystem::path& dir);
// How load_model searches the weights for NaN and ±inf (switchyard --check-weights: every element).
WeightCheck& weight_check();

}  // namespace sy::cli
