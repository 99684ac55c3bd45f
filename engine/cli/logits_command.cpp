// `switchyard logits`: the float32 logits of every position of a prompt, as a .npy file.
#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/cli/cli_support.h"
#include "engine/cli/commands.h"
#include "engine/reference/reference_session.h"
#include "engine/util/npy.h"

namespace sy::cli {
namespace {

struct LogitsArgs {
  std::filesystem::path model;
  std::string tokens;
  std::filesystem::path out;
};

void run(const LogitsArgs& a) {
  const std::vector<std::int32_t> tokens = take(parse_token_list(a.tokens));
  auto weights = load_model(a.model);
  ReferenceSession session(weights, static_cast<std::int32_t>(tokens.size()));
  const std::vector<float> logits = take(session.forward(tokens, /*all_logits=*/true));
  const std::vector<std::int64_t> shape = {static_cast<std::int64_t>(tokens.size()),
                                           weights->config().vocab_size};
  check(write_npy(a.out, shape, logits.data()));
  std::printf("wrote logits [%lld, %lld] to %s\n", static_cast<long long>(shape[0]),
              static_cast<long long>(shape[1]), a.out.string().c_str());
}

}  // namespace

void register_logits(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* sub = app.add_subcommand("logits", "Write the logits of every prompt position as a .npy file");
  sub->add_option("--model", args->model, "Hugging Face model directory")->required();
  sub->add_option("--tokens", args->tokens, "Prompt token ids, comma-separated")->required();
  sub->add_option("--out", args->out, "Output .npy file (float32, shape [T, vocab])")->required();
  sub->callback([args] { run(*args); });
}

}  // namespace sy::cli
