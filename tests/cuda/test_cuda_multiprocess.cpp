// The cuda backend across processes, end to end through the CLI: three ranks started with
// RANK/WORLD_SIZE/MASTER_ADDR (no launcher needed, as on a GPU machine without mpirun) run
// `switchyard generate --backend cuda` on a layout whose devices all sit on GPU 0 but on
// different ranks (attention on ranks 0 and 1, experts on ranks 1 and 2), so every block's rows
// cross processes through host memory both ways. The tokens are compared with the cpu reference
// path (one request at a time) the way the other cuda tests compare theirs: with f32 weights,
// exactly. Not with a one-process cuda run: batches form differently in one process and in
// three, and cuBLAS picks its kernels (and with them the summation order) by shape, as does the
// small-m expert kernel, so two GPU runs agree bit for bit by no construction; the reference is
// batch-independent, and a run within the cpu reference's tokens is what every cuda test asks.
// Everything finishes inside .gpu/check.sh's 150 s step (the ranks are killed at 100 s), so a
// hang fails here with every rank's log rather than as a killed step. Skips where no GPU is
// usable, saying why.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/cuda/cuda_deployment.h"
#include "engine/reference/reference_session.h"
#include "engine/serving/workload.h"
#include "tests/support/free_port.h"
#include "tests/support/shell_run.h"

namespace sy {
namespace {

namespace fs = std::filesystem;
using test::free_port;
using test::shell;
using test::ShellRun;

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool has(const std::string& text, const std::string& fragment) { return text.find(fragment) != std::string::npos; }

// The switchyard binary beside this test's (the build's bin directory, or a gpu-check bundle,
// which packs both), else the one this test was built with.
std::string switchyard_bin() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path beside = self.parent_path() / "switchyard";
    if (fs::is_regular_file(beside)) return beside.string();
  }
  return SY_SWITCHYARD_BIN;
}

// Three ranks, rank r's devices on GPU rank_gpu[r], generate the cpu reference's tokens.
void expect_reference_tokens(const std::array<int, 3>& rank_gpu) {
  const fs::path root = fs::temp_directory_path() / ("sy_test_cuda_multiprocess_" + std::to_string(::getpid()) + "_" +
                                                     std::to_string(rank_gpu[0]) + std::to_string(rank_gpu[1]) +
                                                     std::to_string(rank_gpu[2]));
  fs::remove_all(root);
  fs::create_directories(root);
  const std::string bin = switchyard_bin() + " --threads 1";
  const ShellRun made =
      shell(bin + " make-model --arch mixtral --preset tiny --dtype f32 --seed 5 --out " + (root / "model").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  {
    std::ofstream prompts(root / "prompts.jsonl");
    const char* tokens[] = {"1,2,3", "40,41", "9", "7,8,9,10,11,12", "300", "5,6", "77,78,79", "100"};
    int i = 0;
    for (const char* t : tokens)
      prompts << "{\"id\": \"r" << i << "\", \"tokens\": [" << t << "], \"max_new_tokens\": " << 4 + (i * 5) % 9
              << "}\n", ++i;
    // Attention away from rank 0 too (its sequences' block tables travel), experts on two ranks.
    std::ofstream layout(root / "ranks.toml");
    const std::string g0 = std::to_string(rank_gpu[0]), g1 = std::to_string(rank_gpu[1]),
                      g2 = std::to_string(rank_gpu[2]);
    layout << "name = \"cuda ranks\"\n"
              "[[device]]\nname = \"a0\"\nattention = true\ngpu = " << g0 << "\nrank = 0\n"
              "[[device]]\nname = \"a1\"\nattention = true\ngpu = " << g1 << "\nrank = 1\n"
              "[[device]]\nname = \"e0\"\nexperts = \"auto\"\ngpu = " << g1 << "\nrank = 1\n"
              "[[device]]\nname = \"e1\"\nexperts = \"auto\"\ngpu = " << g2 << "\nrank = 2\n";
  }
  auto command = [&](const fs::path& out) {
    return bin + " generate --backend cuda --model " + (root / "model").string() + " --layout " +
           (root / "ranks.toml").string() + " --prompts " + (root / "prompts.jsonl").string() +
           " --ignore-eos --out " + out.string();
  };

  // Ranks 1 and 2 in the background, rank 0 in front; each rank's log and exit status kept.
  std::string script = "cd " + root.string() + " && export WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                       std::to_string(free_port()) +
                       // A GPU machine's first CUDA calls may stall a rank for a while: no false deaths.
                       " SWITCHYARD_BOOTSTRAP_TIMEOUT=60 SWITCHYARD_HEARTBEAT_TIMEOUT=10; ";
  for (int r = 2; r >= 0; --r) {
    script += "(RANK=" + std::to_string(r) + " timeout -s KILL 100 " + command(root / "many.jsonl") + " > rank" +
              std::to_string(r) + ".log 2>&1; echo exit=$? >> rank" + std::to_string(r) + ".log)";
    script += r > 0 ? " & " : "; wait";
  }
  shell(script);
  std::string logs;
  for (int r = 0; r < 3; ++r) logs += "--- rank " + std::to_string(r) + ":\n" + read_file(root / ("rank" + std::to_string(r) + ".log"));
  for (int r = 0; r < 3; ++r)
    EXPECT_TRUE(has(read_file(root / ("rank" + std::to_string(r) + ".log")), "exit=0")) << logs;
  EXPECT_TRUE(has(logs, "rank 2 of 3")) << logs;

  // The cpu reference of every prompt, as the CLI read them.
  auto weights = ModelWeights::load(root / "model");
  ASSERT_TRUE(weights.ok()) << weights.status().message();
  auto requests = read_prompts_jsonl(root / "prompts.jsonl", (*weights)->config().vocab_size);
  ASSERT_TRUE(requests.ok()) << requests.status().message();
  std::map<std::string, std::vector<std::int32_t>> expected;
  for (const RequestSpec& r : *requests) {
    ReferenceSession session(*weights, static_cast<std::int32_t>(r.prompt.size()) + r.max_new_tokens);
    GenerateOptions options;
    options.max_new_tokens = r.max_new_tokens;
    auto out = generate(session, r.prompt, options);
    ASSERT_TRUE(out.ok()) << out.status().message();
    expected[r.external_id] = *out;
  }
  // Request by request, so that a failure says how many differ (f32: none may).
  const std::string many = read_file(root / "many.jsonl");
  std::istringstream lines(many);
  std::string line;
  std::size_t same = 0, seen = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object() && j.contains("id") && j.contains("output")) << "bad output line: " << line << "\n" << logs;
    const std::string id = j["id"].dump();  // as read_prompts_jsonl names it (a JSON value)
    const auto it = expected.find(id);
    ASSERT_NE(it, expected.end()) << "an output for request " << id << ", which was not asked for\n" << many;
    ++seen;
    if (j["output"].get<std::vector<std::int32_t>>() == it->second) ++same;
  }
  EXPECT_EQ(seen, expected.size()) << "outputs for " << seen << " of " << expected.size() << " requests\n" << many << logs;
  EXPECT_EQ(same, expected.size()) << same << " of " << expected.size()
                                   << " requests have the cpu reference's tokens\n--- three ranks:\n" << many << logs;
  if (!::testing::Test::HasFailure()) fs::remove_all(root);
}

TEST(CudaMultiProcess, ThreeRanksOnOneGpuServeTheReferenceTokens) {
  if (const std::string why = cuda_backend_problem(); !why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
  expect_reference_tokens({0, 0, 0});  // every pair host-staged (ranks sharing a GPU)
}

// Ranks 0 and 2 share GPU 0, rank 1 has GPU 1: rows between ranks 0 and 1 and between 1 and 2
// go over NCCL (NcclPeerLinks), both ways, while those between ranks 0 and 2 stay host-staged.
TEST(CudaMultiProcess, RanksOnTwoGpusServeTheReferenceTokensOverNccl) {
  if (const std::string why = cuda_backend_problem(); !why.empty()) GTEST_SKIP() << "no CUDA device: " << why;
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2)
    GTEST_SKIP() << "needs 2 GPUs for NCCL between ranks, this machine has " << gpus;
  expect_reference_tokens({0, 1, 0});
}

}  // namespace
}  // namespace sy
