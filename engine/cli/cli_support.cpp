#include "engine/cli/cli_support.h"

#include <charconv>

#include "engine/util/assets.h"
#include "engine/util/progress.h"

namespace sy::cli {

void check(const Status& status) {
  if (!status.ok()) throw CommandError{status.message()};
}

StatusOr<std::vector<std::int32_t>> parse_token_list(const std::string& text) {
  std::vector<std::int32_t> tokens;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    std::size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    std::int32_t value = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      return Status::Error("--tokens: '" + item + "' (element " + std::to_string(tokens.size()) +
                           ") is not an integer token id; expected a list like 1,2,3");
    }
    tokens.push_back(value);
    begin = end + 1;
  }
  return tokens;
}

WeightCheck& weight_check() {
  static WeightCheck check = WeightCheck::Sampled;
  return check;
}

std::shared_ptr<const ModelWeights> load_model(const std::filesystem::path& dir) {
  // A named shape (assets/models) has a config but no weights: say what it is for, rather than
  // "directory does not exist".
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec) && !dir.has_parent_path() &&
      std::filesystem::is_regular_file(assets_dir() / "models" / dir / "config.json", ec)) {
    throw CommandError{"'" + dir.string() +
                       "' is a named model shape (no weights): named shapes run only on the simulator, "
                       "with --backend sim (bench, demo, serve). To run real weights give a model directory: "
                       "a Hugging Face checkpoint, or one made by `switchyard make-model --arch mixtral --preset "
                       "small --out DIR`"};
  }
  Progress progress("loading weights", 0, "B");
  return take(ModelWeights::load(dir, weight_check(), [&](std::uint64_t done, std::uint64_t total) {
    progress.set_total(static_cast<std::int64_t>(total));
    progress.update(static_cast<std::int64_t>(done));
  }));
}

}  // namespace sy::cli
