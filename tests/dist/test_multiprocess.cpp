// One deployment across processes, end to end through the CLI on the cpu backend: ranks
// started by mpirun (3 and 4 of them) serve a disaggregated layout with greedy tokens identical
// to the one-process run, under every policy and with a live policy switch mid-run; and a bad
// start (rank 0 unreachable, ranks missing, layouts that differ between ranks) ends every rank
// with an error naming the problem, within the bootstrap timeout. A rank killed mid-run is
// noticed within a second: rank 0 fails its requests with the reason and stops the others; the
// others stop when rank 0 dies; nothing hangs and no process is left behind.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <signal.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

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

class MultiProcess : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("sy_test_multiprocess_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    bin_ = std::string(SY_SWITCHYARD_BIN) + " --threads 1";
    const ShellRun made = shell(bin_ + " make-model --arch mixtral --preset tiny --seed 5 --out " + (root_ / "model").string());
    ASSERT_EQ(made.exit_code, 0) << made.output;
    std::ofstream prompts(root_ / "prompts.jsonl");
    const char* tokens[] = {"1,2,3", "40,41", "9", "7,8,9,10,11,12", "300", "5,6", "77,78,79", "100", "11,12,13,14",
                            "2", "90,91", "15,16,17"};
    int i = 0;
    for (const char* t : tokens)
      prompts << "{\"id\": \"r" << i << "\", \"tokens\": [" << t << "], \"max_new_tokens\": " << 6 + (i * 5) % 11
              << "}\n", ++i;
    // Every device given its rank: the expert devices in the reverse of file order.
    std::ofstream ranked(root_ / "ranked.toml");
    ranked << "name = \"ranked 2a4e\"\n"
              "[[device]]\nname = \"a0\"\nattention = true\nrank = 0\n"
              "[[device]]\nname = \"a1\"\nattention = true\nrank = 0\n"
              "[[device]]\nname = \"e0\"\nexperts = \"auto\"\nrank = 2\n"
              "[[device]]\nname = \"e1\"\nexperts = \"auto\"\nrank = 2\n"
              "[[device]]\nname = \"e2\"\nexperts = \"auto\"\nrank = 1\n"
              "[[device]]\nname = \"e3\"\nexperts = \"auto\"\nrank = 1\n";
    // Attention devices away from rank 0 (which keeps the coordinator and two expert devices).
    std::ofstream remote(root_ / "remote-attention.toml");
    remote << "name = \"remote attention\"\n"
              "[[device]]\nname = \"a0\"\nattention = true\nrank = 1\n"
              "[[device]]\nname = \"a1\"\nattention = true\nrank = 2\n"
              "[[device]]\nname = \"e0\"\nexperts = \"auto\"\nrank = 0\n"
              "[[device]]\nname = \"e1\"\nexperts = \"auto\"\nrank = 0\n"
              "[[device]]\nname = \"e2\"\nexperts = \"auto\"\nrank = 1\n"
              "[[device]]\nname = \"e3\"\nexperts = \"auto\"\nrank = 2\n";
    // Remote attention devices admitting two requests at a time, so that later requests find the
    // earlier prompts' pages cached; prompts sharing a 40-token prefix (some whole).
    std::ofstream small_batch(root_ / "remote-attention-batch2.toml");
    small_batch << "name = \"remote attention, batch 2\"\n[capacity]\nmax_batch = 2\npage_size = 8\n"
                   "[[device]]\nname = \"a0\"\nattention = true\nrank = 1\n"
                   "[[device]]\nname = \"a1\"\nattention = true\nrank = 2\n"
                   "[[device]]\nname = \"e0\"\nexperts = \"auto\"\nrank = 0\n"
                   "[[device]]\nname = \"e1\"\nexperts = \"auto\"\nrank = 1\n";
    std::ofstream shared(root_ / "shared-prefix.jsonl");
    for (int j = 0; j < 12; ++j) {
      std::string t;
      for (int k = 0; k < 40; ++k) t += std::to_string((k * 37 + 11) % 500) + ", ";
      for (int k = 0; k < (j % 4 == 3 ? 0 : 1 + j % 5); ++k) t += std::to_string((j * 13 + k * 7) % 500) + ", ";
      t += "7";
      shared << "{\"id\": \"s" << j << "\", \"tokens\": [" << t << "], \"max_new_tokens\": " << 4 + j % 5 << "}\n";
    }
    // The same devices as disaggregated-2a4e with experts moved between ranks and expert 0 copied.
    std::ofstream moved(root_ / "moved.toml");
    moved << "name = \"moved\"\n"
             "[[device]]\nname = \"gpu0\"\nattention = true\n"
             "[[device]]\nname = \"gpu1\"\nattention = true\n"
             "[[device]]\nname = \"gpu2\"\nexperts = [5, 6]\n"
             "[[device]]\nname = \"gpu3\"\nexperts = [1]\n"
             "[[device]]\nname = \"gpu4\"\nexperts = [0, 2, 4, 7]\n"
             "[[device]]\nname = \"gpu5\"\nexperts = [3, 0]\n";
    // Debian's CI containers run as root, which mpirun refuses unless told.
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    // Long enough that a rank killed a second in is killed mid-run.
    std::ofstream long_prompts(root_ / "long.jsonl");
    for (int j = 0; j < 12; ++j)
      long_prompts << "{\"id\": \"l" << j << "\", \"tokens\": [" << j + 1 << ", " << j + 2
                   << "], \"max_new_tokens\": 3000}\n";
    mpirun_ = shell("command -v mpirun").exit_code == 0;
    // SWITCHYARD_KEYS: the ranks' key directory, and another one (a rank of another deployment).
    for (const char* dir : {"keys", "other-keys"}) {
      const ShellRun k = shell(bin_ + " keys --out " + (root_ / dir).string() + " --client rank");
      ASSERT_EQ(k.exit_code, 0) << k.output;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  void SetUp() override {
    if (!mpirun_ && requires_mpirun()) GTEST_SKIP() << "mpirun not found (Debian package openmpi-bin)";
  }
  virtual bool requires_mpirun() const { return true; }

  static std::string generate(const std::string& layout, const std::string& extra, const fs::path& out) {
    return "generate --model " + (root_ / "model").string() + " --layout " + layout + " --prompts " +
           (root_ / "prompts.jsonl").string() + " --ignore-eos --out " + out.string() + " " + extra;
  }
  // `more`: further mpirun options, such as "-x SWITCHYARD_KEYS=DIR ".
  static std::string mpirun(int ranks, int port, const std::string& more = "") {
    return "timeout 120 mpirun --oversubscribe -np " + std::to_string(ranks) + " -x MASTER_PORT=" +
           std::to_string(port) + " -x SWITCHYARD_BOOTSTRAP_TIMEOUT=20 -x OMP_WAIT_POLICY=PASSIVE " + more;
  }
  // The one-process run and an mpirun of `ranks` ranks of the same command: same tokens.
  static void expect_same_tokens(const std::string& layout, const std::string& extra, int ranks,
                                 const std::string& mpirun_options = "") {
    const fs::path one = root_ / "one.jsonl", many = root_ / "many.jsonl";
    fs::remove(one);
    fs::remove(many);
    const ShellRun single = shell(bin_ + " " + generate(layout, extra, one));
    ASSERT_EQ(single.exit_code, 0) << single.output;
    const ShellRun multi = shell(mpirun(ranks, free_port(), mpirun_options) + bin_ + " " + generate(layout, extra, many));
    ASSERT_EQ(multi.exit_code, 0) << multi.output;
    EXPECT_TRUE(has(multi.output, "rank " + std::to_string(ranks - 1) + " of " + std::to_string(ranks) + " (mpirun"))
        << multi.output;
    const std::string a = read_file(one), b = read_file(many);
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a, b) << extra << ", " << ranks << " ranks";
    if (has(extra, "--switch-placement")) {
      EXPECT_TRUE(has(multi.output, "switched placement")) << multi.output;
    }
    if (has(extra, "--switch-policy")) {
      EXPECT_TRUE(has(single.output, "(1 switch(es))")) << single.output;
      EXPECT_TRUE(has(multi.output, "(1 switch(es))")) << multi.output;
      EXPECT_TRUE(has(multi.output, "switched to policy")) << multi.output;
    }
  }

  static inline fs::path root_;
  static inline std::string bin_;
  static inline bool mpirun_ = false;
};

const std::string kLayout = std::string(SY_SOURCE_DIR) + "/layouts/disaggregated-2a4e.toml";

TEST_F(MultiProcess, ThreeRanksMatchOneProcessUnderEveryPolicy) {
  // adaptive: its timer lives in every rank's coordinator and must let the workers' ranks end.
  for (const char* policy : {"async", "pingpong", "sync", "findep --expert-chunks 3", "adaptive"}) {
    SCOPED_TRACE(policy);
    expect_same_tokens(kLayout, std::string("--policy ") + policy, 3);
  }
}

TEST_F(MultiProcess, LivePolicySwitchMidRunAcrossThreeAndFourRanks) {
  const std::pair<const char*, const char*> switches[] = {
      {"async", "pingpong"}, {"pingpong", "findep"}, {"findep", "sync"}, {"sync", "async"}};
  for (int ranks : {3, 4}) {
    for (const auto& [from, to] : switches) {
      SCOPED_TRACE(std::string(from) + " -> " + to + ", " + std::to_string(ranks) + " ranks");
      expect_same_tokens(kLayout, std::string("--policy ") + from + " --switch-policy " + to + " --switch-after 25", ranks);
    }
  }
}

// Experts move between ranks (and gain a copy) mid-run: every rank applies the new placement
// at the same safe point, with or without a policy switch at the same time.
TEST_F(MultiProcess, LivePlacementChangeMovesExpertsBetweenRanks) {
  const std::string moved = " --switch-placement " + (root_ / "moved.toml").string() + " --switch-after 20";
  for (int ranks : {3, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_same_tokens(kLayout, "--policy async" + moved, ranks);
    expect_same_tokens(kLayout, "--policy pingpong --switch-policy sync" + moved, ranks);
  }
}

TEST_F(MultiProcess, RankKeysOfTheLayoutPlaceDevices) {
  expect_same_tokens((root_ / "ranked.toml").string(), "--policy pingpong --switch-policy async --switch-after 10", 3);
}

// Attention devices on ranks other than 0: rank 0 allocates their KV pages and sends the block
// tables ahead of the rows, the devices send their sampled tokens back; the same tokens under
// every policy and across a live switch, and when drawn under min-p and every penalty (the
// remote devices count their own samples and get the prompt with the table).
TEST_F(MultiProcess, AttentionDevicesOnOtherRanksMatchOneProcess) {
  const std::string layout = (root_ / "remote-attention.toml").string();
  for (const char* policy : {"async", "pingpong", "sync"}) {
    SCOPED_TRACE(policy);
    expect_same_tokens(layout, std::string("--policy ") + policy, 3);
  }
  expect_same_tokens(layout, "--policy pingpong --switch-policy async --switch-after 20", 3);
  expect_same_tokens(layout, "--policy async --switch-policy sync --switch-after 25", 3);
  expect_same_tokens(layout,
                     "--policy async --temperature 0.8 --seed 3 --min-p 0.05 --presence-penalty 0.5 "
                     "--frequency-penalty -0.5 --repetition-penalty 1.3",
                     3);
}

// Prefix caching with the attention ranks in other processes: rank 0's block managers share the
// cached pages and send the tables ahead, the remote devices read KV that an earlier request
// wrote there. The tokens are those of one process, and of one process without the cache.
TEST_F(MultiProcess, PrefixCachingWithRemoteAttentionMatchesOneProcess) {
  const std::string layout = (root_ / "remote-attention-batch2.toml").string();
  const auto run = [&](const std::string& launcher, const std::string& extra, const fs::path& out) {
    fs::remove(out);
    const ShellRun r = shell(launcher + bin_ + " generate --model " + (root_ / "model").string() + " --layout " + layout +
                             " --prompts " + (root_ / "shared-prefix.jsonl").string() + " --ignore-eos --out " +
                             out.string() + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    // With the cache, later requests find the shared prefix: a count above 0 of the 12 × 40+.
    if (has(extra, "--prefix-caching")) {
      EXPECT_TRUE(has(r.output, "prefix cache: ")) << r.output;
      EXPECT_FALSE(has(r.output, "prefix cache: 0 of")) << r.output;
    }
    return read_file(out);
  };
  for (const char* policy : {"async", "sync"}) {
    SCOPED_TRACE(policy);
    const std::string plain = run("", std::string("--policy ") + policy, root_ / "plain.jsonl");
    const std::string one = run("", std::string("--policy ") + policy + " --prefix-caching", root_ / "one.jsonl");
    const std::string many =
        run(mpirun(3, free_port()), std::string("--policy ") + policy + " --prefix-caching", root_ / "many.jsonl");
    ASSERT_FALSE(plain.empty());
    EXPECT_EQ(one, plain);
    EXPECT_EQ(many, plain);
  }
}

// Chunked prefill with the attention devices in other processes: they tell a prompt's non-final
// chunks from SequenceOpen's prompt length and send token -1 back for them (docs/wire-format.md),
// and rank 0 feeds the next chunk. The 41-to-46-token prompts in chunks of at most 16 rows (7:
// below the decodes' share at times) give the tokens of whole prompts in one process, with and
// without prefix caching.
TEST_F(MultiProcess, ChunkedPrefillWithRemoteAttentionMatchesOneProcess) {
  const std::string layout = (root_ / "remote-attention-batch2.toml").string();
  const auto run = [&](const std::string& launcher, const std::string& extra, const fs::path& out) {
    fs::remove(out);
    const ShellRun r = shell(launcher + bin_ + " generate --model " + (root_ / "model").string() + " --layout " + layout +
                             " --prompts " + (root_ / "shared-prefix.jsonl").string() + " --ignore-eos --out " +
                             out.string() + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_file(out);
  };
  for (const char* policy : {"async", "pingpong", "sync"}) {
    SCOPED_TRACE(policy);
    const std::string plain = run("", std::string("--policy ") + policy, root_ / "plain.jsonl");
    ASSERT_FALSE(plain.empty());
    for (const char* chunking : {"--max-num-batched-tokens 16", "--max-num-batched-tokens 7 --prefix-caching"}) {
      SCOPED_TRACE(chunking);
      const std::string extra = std::string("--policy ") + policy + " " + chunking;
      EXPECT_EQ(run("", extra, root_ / "one.jsonl"), plain);
      EXPECT_EQ(run(mpirun(3, free_port()), extra, root_ / "many.jsonl"), plain);
    }
  }
}

// AMoE's deployment over two nodes: an attention device and its share of the experts on each
// rank (the colocated layout, split evenly).
TEST_F(MultiProcess, ColocatedLayoutSplitsOverTwoRanks) {
  const std::string layout = std::string(SY_SOURCE_DIR) + "/layouts/colocated-4.toml";
  expect_same_tokens(layout, "--policy sync", 2);
  expect_same_tokens(layout, "--policy async --switch-policy pingpong --switch-after 20", 2);
}

// bench serves one deployment per policy, one after another, on the same ranks.
TEST_F(MultiProcess, BenchComparesPoliciesAcrossThreeRanks) {
  const std::string args = " bench --model " + (root_ / "model").string() + " --layout " + kLayout +
                           " --workload short --rate 100 --duration 0.5 --compare sync,pingpong,async --clock wall";
  const ShellRun single = shell(bin_ + args);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const ShellRun multi = shell(mpirun(3, free_port()) + bin_ + args);
  ASSERT_EQ(multi.exit_code, 0) << multi.output;
  // The same requests, every one served to its last token, under each of the three policies.
  auto generated = [](const std::string& out) {
    std::vector<std::string> lines;
    for (std::size_t at = out.find("generated "); at != std::string::npos; at = out.find("generated ", at + 1))
      lines.push_back(out.substr(at, out.find('\n', at) - at));
    return lines;
  };
  const auto a = generated(single.output), b = generated(multi.output);
  ASSERT_EQ(a.size(), 3u) << single.output;
  EXPECT_EQ(a, b) << multi.output;
  for (const char* policy : {"== sync", "== pingpong", "== async"}) EXPECT_TRUE(has(multi.output, policy)) << multi.output;
  // Rank 0's report covers the other ranks' devices too: their events were relayed, on rank
  // 0's clock (each rank says the offset it measured).
  for (const char* device : {"\ngpu2 ", "\ngpu5 "}) {
    const auto at = multi.output.rfind(device);
    ASSERT_NE(at, std::string::npos) << multi.output;
    std::istringstream row(multi.output.substr(at + 1, multi.output.find('\n', at + 1) - at - 1));
    std::string name, busy, empty, barrier, transfer, weights;
    long long executions = 0;
    row >> name >> busy >> empty >> barrier >> transfer >> weights >> executions;
    EXPECT_GT(executions, 0) << device << " in\n" << multi.output;
    EXPECT_NE(busy, "0.0%") << device << " in\n" << multi.output;
  }
  EXPECT_TRUE(has(multi.output, "rank 1: clock offset to rank 0")) << multi.output;
  EXPECT_TRUE(has(multi.output, "rank 2: clock offset to rank 0")) << multi.output;
}

// SWITCHYARD_KEYS: every socket between the ranks speaks CURVE; the tokens do not change,
// across a live policy switch (drain, apply) and with attention on other ranks too.
TEST_F(MultiProcess, RanksWithKeysMatchOneProcess) {
  const std::string keys = "-x SWITCHYARD_KEYS=" + (root_ / "keys").string() + " ";
  expect_same_tokens(kLayout, "--policy async --switch-policy pingpong --switch-after 25", 3, keys);
  expect_same_tokens((root_ / "remote-attention.toml").string(), "--policy sync", 3, keys);
}

TEST_F(MultiProcess, MismatchedLayoutUnderMpirunIsRefusedOnEveryRank) {
  const fs::path out = root_ / "x.jsonl";
  // MPMD: rank 0 with the layout's policy, ranks 1 and 2 with another one.
  const int port = free_port();
  // -x applies to one application context: the second one gets its own.
  const ShellRun r = shell(mpirun(1, port) + bin_ + " " + generate(kLayout, "", out) + " : -np 2 -x MASTER_PORT=" +
                           std::to_string(port) + " -x SWITCHYARD_BOOTSTRAP_TIMEOUT=20 " + bin_ + " " +
                           generate(kLayout, "--policy sync", out));
  EXPECT_NE(r.exit_code, 0) << r.output;
  // mpirun ends the job as soon as the first rank exits, so rank 0's own line may not make it
  // out; the plain launch below checks every rank's message.
  EXPECT_TRUE(has(r.output, "refused the deployment")) << r.output;
  EXPECT_TRUE(has(r.output, "differing at line")) << r.output;
  EXPECT_LT(r.seconds, 60) << r.output;
}

// Plain RANK/WORLD_SIZE launches: no mpirun needed.
class Bootstrap : public MultiProcess {
  bool requires_mpirun() const override { return false; }
};

TEST_F(Bootstrap, UnreachableRankZeroIsNamedWithinTheTimeout) {
  const int port = free_port();
  const ShellRun r = shell("RANK=1 WORLD_SIZE=2 MASTER_PORT=" + std::to_string(port) + " SWITCHYARD_BOOTSTRAP_TIMEOUT=1 " +
                      bin_ + " " + generate(kLayout, "", root_ / "x.jsonl"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "could not reach rank 0 at tcp://127.0.0.1:" + std::to_string(port))) << r.output;
  EXPECT_LT(r.seconds, 15);
}

TEST_F(Bootstrap, MissingRanksAreNamedByRankZero) {
  const ShellRun r = shell("RANK=0 WORLD_SIZE=3 MASTER_PORT=" + std::to_string(free_port()) +
                      " SWITCHYARD_BOOTSTRAP_TIMEOUT=1 " + bin_ + " " + generate(kLayout, "", root_ / "x.jsonl"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "rank(s) 1, 2 did not check in")) << r.output;
  EXPECT_LT(r.seconds, 15);
}

// A sweep is many single-process simulations: under a launcher every rank ran it whole on its own.
TEST_F(Bootstrap, ASimSweepIsRefusedUnderALauncher) {
  const ShellRun r = shell("RANK=0 WORLD_SIZE=2 SWITCHYARD_ASSETS=" + std::string(SY_SOURCE_DIR) + "/assets " + bin_ +
                           " bench --backend sim --model mixtral-8x7b --layout colocated:2 --duration 0.1 --sweep 10,20");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "--sweep runs in one process")) << r.output;
}

TEST_F(Bootstrap, MismatchedLayoutsEndBothRanksWithTheDifference) {
  const std::string env = "WORLD_SIZE=2 MASTER_PORT=" + std::to_string(free_port()) + " SWITCHYARD_BOOTSTRAP_TIMEOUT=10 ";
  const fs::path log0 = root_ / "rank0.log", log1 = root_ / "rank1.log";
  const ShellRun r = shell("(RANK=0 " + env + bin_ + " " + generate(kLayout, "", root_ / "x.jsonl") + " > " + log0.string() +
                      " 2>&1; echo rank0=$? >> " + log0.string() + ") & RANK=1 " + env + bin_ + " " +
                      generate(kLayout, "--policy pingpong", root_ / "y.jsonl") + " > " + log1.string() +
                      " 2>&1; echo rank1=$? >> " + log1.string() + "; wait");
  const std::string a = read_file(log0), b = read_file(log1);
  EXPECT_TRUE(has(a, "bootstrap refused")) << a;
  EXPECT_TRUE(has(a, "differing at line")) << a;
  EXPECT_TRUE(has(a, "rank0=1")) << a;
  EXPECT_TRUE(has(b, "refused the deployment")) << b;
  EXPECT_TRUE(has(b, "rank1=1")) << b;
  EXPECT_LT(r.seconds, 30);
}

// Keyed ranks 0 and 1 serve while two processes that also say they are rank 1 knock at rank 0's
// bootstrap socket first: one without keys, one with another key directory. Without keys the
// first to arrive would be taken for rank 1 (and the real one refused as a second rank 1); with
// them neither gets in: they give up at their bootstrap timeout and the ranks give one process's
// tokens.
TEST_F(Bootstrap, KeyedRanksKeepOutRanksWithoutTheirKeys) {
  const fs::path one = root_ / "one.jsonl";
  fs::remove(one);
  const ShellRun single = shell(bin_ + " " + generate(kLayout, "--policy async", one));
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto gen = [&](const std::string& out) { return bin_ + " " + generate(kLayout, "--policy async", root_ / out); };
  const std::string keys = " SWITCHYARD_KEYS=" + (root_ / "keys").string(),
                    other = " SWITCHYARD_KEYS=" + (root_ / "other-keys").string();
  // Rank `rank` with `env`, its output in `log`, its pid in `pid`.
  const auto start = [&](const std::string& rank, const std::string& env, const std::string& out,
                         const std::string& log, const std::string& pid) {
    return "RANK=" + rank + " " + env + " timeout -s KILL 60 " + gen(out) + " > " + log + " 2>&1 & " + pid + "=$!; ";
  };
  const ShellRun r = shell(
      "cd " + root_.string() + " && rm -f keyed*.jsonl rank*.log rogue*.log status.log && export WORLD_SIZE=2 "
      "MASTER_PORT=" + std::to_string(free_port()) + " OMP_WAIT_POLICY=PASSIVE; " +
      start("1", "SWITCHYARD_BOOTSTRAP_TIMEOUT=4", "keyed-rogue1.jsonl", "rogue1.log", "q1") +
      start("1", "SWITCHYARD_BOOTSTRAP_TIMEOUT=4" + other, "keyed-rogue2.jsonl", "rogue2.log", "q2") +
      start("0", "SWITCHYARD_BOOTSTRAP_TIMEOUT=20" + keys, "keyed-0.jsonl", "rank0.log", "p0") + "sleep 1.5; " +
      start("1", "SWITCHYARD_BOOTSTRAP_TIMEOUT=20" + keys, "keyed-1.jsonl", "rank1.log", "p1") +
      "wait $p0; echo rank0=$? >> status.log; wait $p1; echo rank1=$? >> status.log; "
      "wait $q1; echo rogue1=$? >> status.log; wait $q2; echo rogue2=$? >> status.log");
  const std::string status = read_file(root_ / "status.log"), log0 = read_file(root_ / "rank0.log"),
                    rogue1 = read_file(root_ / "rogue1.log"), rogue2 = read_file(root_ / "rogue2.log");
  EXPECT_TRUE(has(status, "rank0=0") && has(status, "rank1=0")) << status << log0 << read_file(root_ / "rank1.log");
  EXPECT_EQ(read_file(root_ / "keyed-0.jsonl"), read_file(one)) << log0;
  EXPECT_TRUE(has(status, "rogue1=1") && has(status, "rogue2=1")) << status << rogue1 << rogue2;
  EXPECT_TRUE(has(rogue1, "could not reach rank 0")) << rogue1;
  EXPECT_TRUE(has(rogue2, "could not reach rank 0")) << rogue2;
  EXPECT_TRUE(has(rogue2, "only ranks with the same key directory get in")) << rogue2;
  EXPECT_LT(r.seconds, 50) << status;
}

// Ranks that would listen on every interface without keys refuse to start, every one of them,
// at once, naming the variables; a key directory that is not there is named the same way.
TEST_F(Bootstrap, BeyondLoopbackWithoutKeysOrWithABadKeyDirectoryEveryRankRefusesToStart) {
  const std::string gen = bin_ + " " + generate(kLayout, "", root_ / "x.jsonl");
  const auto both = [&](const std::string& env) {
    return shell("cd " + root_.string() + " && rm -f status.log rank*.log; export WORLD_SIZE=2 MASTER_PORT=" +
                 std::to_string(free_port()) + " " + env + "; "
                 "RANK=0 timeout -s KILL 30 " + gen + " > rank0.log 2>&1 & p0=$!; "
                 "RANK=1 timeout -s KILL 30 " + gen + " > rank1.log 2>&1; echo rank1=$? >> status.log; "
                 "wait $p0; echo rank0=$? >> status.log");
  };
  const ShellRun open = both("MASTER_ADDR=10.255.255.1");
  for (int rank : {0, 1}) {
    const std::string log = read_file(root_ / ("rank" + std::to_string(rank) + ".log"));
    EXPECT_TRUE(has(log, "MASTER_ADDR='10.255.255.1' is not a loopback address")) << log;
    EXPECT_TRUE(has(log, "SWITCHYARD_KEYS=DIR")) << log;
    EXPECT_TRUE(has(log, "SWITCHYARD_INSECURE=1")) << log;
  }
  EXPECT_TRUE(has(read_file(root_ / "status.log"), "rank0=1")) << read_file(root_ / "status.log");
  EXPECT_TRUE(has(read_file(root_ / "status.log"), "rank1=1")) << read_file(root_ / "status.log");
  EXPECT_LT(open.seconds, 15);

  const std::string missing = (root_ / "no-keys-here").string();
  const ShellRun bad = both("SWITCHYARD_KEYS=" + missing);
  for (int rank : {0, 1}) {
    const std::string log = read_file(root_ / ("rank" + std::to_string(rank) + ".log"));
    EXPECT_TRUE(has(log, "SWITCHYARD_KEYS='" + missing + "': no such directory")) << log;
  }
  EXPECT_TRUE(has(read_file(root_ / "status.log"), "rank0=1")) << read_file(root_ / "status.log");
  EXPECT_TRUE(has(read_file(root_ / "status.log"), "rank1=1")) << read_file(root_ / "status.log");
  EXPECT_LT(bad.seconds, 15);
}

// This host's first IPv4 address that is not a loopback one ("" when it has none).
std::string routable_address() {
  const ShellRun r = shell("hostname -I 2>/dev/null");
  std::istringstream words(r.output);
  for (std::string w; words >> w;)
    if (w.find(':') == std::string::npos && w.rfind("127.", 0) != 0) return w;
  return "";
}

// Beyond loopback for real: rank 0's bootstrap socket and every data socket on every interface,
// reached at this host's address, with keys; the tokens of one process.
TEST_F(Bootstrap, KeyedRanksOnARoutableAddressMatchOneProcess) {
  const std::string addr = routable_address();
  if (addr.empty()) GTEST_SKIP() << "this host has no IPv4 address beyond loopback";
  const fs::path one = root_ / "one.jsonl";
  fs::remove(one);
  const ShellRun single = shell(bin_ + " " + generate(kLayout, "--policy pingpong", one));
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const auto gen = [&](int rank) {
    return bin_ + " " + generate(kLayout, "--policy pingpong", root_ / ("routable-" + std::to_string(rank) + ".jsonl"));
  };
  std::string script = "cd " + root_.string() + " && rm -f routable*.jsonl rank*.log status.log && export WORLD_SIZE=3 "
                       "MASTER_PORT=" + std::to_string(free_port()) + " MASTER_ADDR=" + addr +
                       " SWITCHYARD_ADVERTISE_ADDR=" + addr + " SWITCHYARD_KEYS=" + (root_ / "keys").string() +
                       " SWITCHYARD_BOOTSTRAP_TIMEOUT=20 OMP_WAIT_POLICY=PASSIVE; ";
  for (int r = 0; r < 3; ++r)
    script += "RANK=" + std::to_string(r) + " timeout -s KILL 60 " + gen(r) + " > rank" +
              std::to_string(r) + ".log 2>&1 & p" + std::to_string(r) + "=$!; ";
  script += "wait $p0; echo rank0=$? >> status.log; wait $p1; echo rank1=$? >> status.log; "
            "wait $p2; echo rank2=$? >> status.log";
  const ShellRun r = shell(script);
  const std::string status = read_file(root_ / "status.log"), log0 = read_file(root_ / "rank0.log");
  EXPECT_TRUE(has(status, "rank0=0") && has(status, "rank1=0") && has(status, "rank2=0")) << status << log0;
  EXPECT_EQ(read_file(root_ / "routable-0.jsonl"), read_file(one)) << log0;
  EXPECT_LT(r.seconds, 50) << status;
}

// Three ranks started with RANK/WORLD_SIZE on the long prompts; `victim` is SIGKILLed a second
// after it started serving. Each rank's output goes to rankN.log, its exit status to
// status.log ("rankN=CODE"); `timeout` kills any rank still there after 60 s, which the test
// would see.
ShellRun kill_one_rank(const fs::path& root, const std::string& bin, int victim, const std::string& layout = kLayout) {
  const std::string gen = "generate --model " + (root / "model").string() + " --layout " + layout + " --prompts " +
                          (root / "long.jsonl").string() + " --ignore-eos --out ";
  const std::string v = std::to_string(victim);
  std::string script = "cd " + root.string() + " && rm -f rank*.log status.log && export WORLD_SIZE=3 MASTER_PORT=" +
                       std::to_string(free_port()) + " SWITCHYARD_BOOTSTRAP_TIMEOUT=20 OMP_WAIT_POLICY=PASSIVE; ";
  for (int r = 0; r < 3; ++r)
    script += "RANK=" + std::to_string(r) + " timeout -s KILL 60 " + bin + " " + gen + "out" + std::to_string(r) +
              ".jsonl > rank" + std::to_string(r) + ".log 2>&1 & p" + std::to_string(r) + "=$!; ";
  script += "for i in $(seq 200); do grep -q 'rank " + v + " of 3' rank" + v + ".log && break; sleep 0.1; done; sleep 1; "
            "kill -9 $(grep -o 'rank " + v + " of 3 (env, pid [0-9]*' rank" + v + ".log | grep -o '[0-9]*$'); "
            "wait $p0; echo rank0=$? >> status.log; wait $p1; echo rank1=$? >> status.log; "
            "wait $p2; echo rank2=$? >> status.log";
  return shell(script);
}

// The silence a rank reported before it declared another dead, in ms; -1 when it did not.
double reported_silence_ms(const std::string& log, int dead_rank) {
  const std::string key = "rank " + std::to_string(dead_rank) + " stopped answering (no heartbeat for ";
  const auto at = log.find(key);
  if (at == std::string::npos) return -1;
  return std::atof(log.c_str() + at + key.size());
}

TEST_F(Bootstrap, AKilledWorkerRankFailsTheRequestsWithTheReasonAndStopsTheOthers) {
  const ShellRun r = kill_one_rank(root_, bin_, 2);
  const std::string status = read_file(root_ / "status.log"), log0 = read_file(root_ / "rank0.log"),
                    log1 = read_file(root_ / "rank1.log");
  EXPECT_LT(r.seconds, 50) << "a rank was left waiting\n" << status << log0 << log1;
  EXPECT_TRUE(has(status, "rank0=1")) << status << log0;
  EXPECT_TRUE(has(status, "rank1=0")) << status << log1;  // told to stop by rank 0
  EXPECT_TRUE(has(status, "rank2=137")) << status;
  // Detected within a second of the last heartbeat it sent (so within a second of the kill).
  const double silent = reported_silence_ms(log0, 2);
  EXPECT_GT(silent, 0) << log0;
  EXPECT_LT(silent, 1000) << log0;
  // Every request failed with the reason, and the command says why it stopped.
  EXPECT_TRUE(has(log0, "switchyard generate: rejected: rank 2 stopped answering")) << log0;
  EXPECT_TRUE(has(log0, "served 12 requests (12 rejected)")) << log0;
  EXPECT_TRUE(has(log0, "the deployment stopped: rank 2 stopped answering")) << log0;
}

// The rank that runs an attention device dies: its requests, and everyone else's, fail with
// the reason; rank 0 stops the survivors.
TEST_F(Bootstrap, AKilledAttentionRankFailsTheRequestsWithTheReason) {
  const ShellRun r = kill_one_rank(root_, bin_, 1, (root_ / "remote-attention.toml").string());
  const std::string status = read_file(root_ / "status.log"), log0 = read_file(root_ / "rank0.log");
  EXPECT_LT(r.seconds, 50) << "a rank was left waiting\n" << status << log0;
  EXPECT_TRUE(has(status, "rank0=1") && has(status, "rank1=137") && has(status, "rank2=0")) << status << log0;
  EXPECT_TRUE(has(log0, "served 12 requests (12 rejected)")) << log0;
  EXPECT_TRUE(has(log0, "the deployment stopped: rank 1 stopped answering")) << log0;
}

TEST_F(Bootstrap, AKilledRankZeroStopsEveryOtherRank) {
  const ShellRun r = kill_one_rank(root_, bin_, 0);
  const std::string status = read_file(root_ / "status.log");
  EXPECT_LT(r.seconds, 50) << status;
  EXPECT_TRUE(has(status, "rank0=137")) << status;
  for (int k : {1, 2}) {
    const std::string log = read_file(root_ / ("rank" + std::to_string(k) + ".log"));
    EXPECT_TRUE(has(status, "rank" + std::to_string(k) + "=1")) << status << log;
    const double silent = reported_silence_ms(log, 0);
    EXPECT_GT(silent, 0) << log;
    EXPECT_LT(silent, 1000) << log;
  }
}

// `serve` as three ranks started with RANK/WORLD_SIZE: rank 0 answers HTTP, the expert devices
// are on ranks 1 and 2. `then` runs in the shell once rank 0 listens ($port, $p0..$p2 set);
// each rank's output goes to serveN.log and the exit statuses to status.log.
ShellRun serve_three_ranks(const fs::path& root, const std::string& bin, const std::string& then,
                           const std::string& layout = kLayout) {
  const std::string serve = "serve --model " + (root / "model").string() + " --layout " + layout + " --no-console ";
  std::string script = "cd " + root.string() + " && rm -f serve*.log status.log stream.txt && export WORLD_SIZE=3 MASTER_PORT=" +
                       std::to_string(free_port()) + " SWITCHYARD_BOOTSTRAP_TIMEOUT=20 OMP_WAIT_POLICY=PASSIVE; ";
  for (int r = 1; r < 3; ++r)
    script += "RANK=" + std::to_string(r) + " timeout -s KILL 60 " + bin + " " + serve + "> serve" + std::to_string(r) +
              ".log 2>&1 & p" + std::to_string(r) + "=$!; ";
  script += "RANK=0 timeout -s KILL 60 " + bin + " " + serve + "--no-telemetry --port 0 > serve0.log 2>&1 & p0=$!; "
            "for i in $(seq 300); do grep -q 'OpenAI-compatible API at' serve0.log && break; sleep 0.1; done; "
            "port=$(grep -o '127.0.0.1:[0-9]*' serve0.log | head -1 | cut -d: -f2); " + then +
            "; wait $p0; echo rank0=$? >> status.log; wait $p1; echo rank1=$? >> status.log; "
            "wait $p2; echo rank2=$? >> status.log";
  return shell(script);
}

TEST_F(Bootstrap, ServeAcrossThreeRanksAnswersAsOneProcessAndEndsOnSigterm) {
  if (shell("command -v curl").exit_code != 0) GTEST_SKIP() << "curl not found (Debian package curl)";
  const ShellRun one = shell(bin_ + " generate --model " + (root_ / "model").string() +
                             " --tokens 1,2,3 --max-new-tokens 8 --ignore-eos");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string expected = one.output.substr(one.output.rfind('['), one.output.rfind(']') - one.output.rfind('[') + 1);
  const ShellRun r = serve_three_ranks(
      root_, bin_,
      "curl -s --max-time 30 localhost:$port/v1/completions -H 'content-type: application/json' -d "
      "'{\"prompt\": [1, 2, 3], \"max_tokens\": 8, \"temperature\": 0, \"ignore_eos\": true}' > answer.json; "
      "kill -TERM $p0");
  const std::string status = read_file(root_ / "status.log"), answer = read_file(root_ / "answer.json"),
                    log0 = read_file(root_ / "serve0.log"), log1 = read_file(root_ / "serve1.log");
  EXPECT_TRUE(has(answer, "\"token_ids\":" + expected)) << answer << "\nexpected " << expected << "\n" << log0;
  // SIGTERM to rank 0 ends every rank cleanly: rank 0 prints its summary and tells the others.
  EXPECT_TRUE(has(status, "rank0=0") && has(status, "rank1=0") && has(status, "rank2=0")) << status << log0 << log1;
  EXPECT_TRUE(has(log0, "interrupted:")) << log0;
  EXPECT_TRUE(has(log1, "rank 1 of 3: serving the workers of its devices")) << log1;
  EXPECT_LT(r.seconds, 50) << status;
}

// Log-probabilities sampled on an attention device of rank 1 or 2 travel back to rank 0's API
// with the token: the same answer, alternatives included, as one process gives.
TEST_F(Bootstrap, ServeWithAttentionOnOtherRanksReturnsTheSameLogprobs) {
  if (shell("command -v curl").exit_code != 0) GTEST_SKIP() << "curl not found (Debian package curl)";
  const std::string layout = (root_ / "remote-attention.toml").string();
  const std::string request =
      "curl -s --max-time 30 localhost:$port/v1/completions -H 'content-type: application/json' -d "
      "'{\"prompt\": [4, 5, 6], \"max_tokens\": 6, \"temperature\": 0, \"ignore_eos\": true, \"logprobs\": 3}'";
  const ShellRun one = shell("cd " + root_.string() + " && (" + bin_ + " serve --model " + (root_ / "model").string() +
                             " --layout " + layout + " --no-console --no-telemetry --port 0 > single.log 2>&1 & p=$!; "
                             "for i in $(seq 300); do grep -q 'OpenAI-compatible API at' single.log && break; sleep 0.1; done; "
                             "port=$(grep -o '127.0.0.1:[0-9]*' single.log | head -1 | cut -d: -f2); " +
                             request + " > single.json; kill -TERM $p; wait $p)");
  const std::string expected = read_file(root_ / "single.json");
  ASSERT_TRUE(has(expected, "\"top_logprobs\"")) << expected << read_file(root_ / "single.log");
  serve_three_ranks(root_, bin_, request + " > answer.json; kill -TERM $p0", layout);
  const std::string answer = read_file(root_ / "answer.json"), log0 = read_file(root_ / "serve0.log");
  // Everything but the response's id and creation time.
  const auto choices = [](const std::string& body) { return body.substr(body.find("\"choices\"")); };
  ASSERT_TRUE(has(answer, "\"choices\"")) << answer << log0;
  EXPECT_EQ(choices(answer).substr(0, choices(answer).find("\"created\"")),
            choices(expected).substr(0, choices(expected).find("\"created\"")))
      << answer << "\nexpected " << expected;
  EXPECT_TRUE(has(read_file(root_ / "status.log"), "rank1=0")) << read_file(root_ / "status.log");
}

// Guided decoding on an attention device of rank 1 or 2: rank 0 sends the process the model's
// vocabulary once (message 33) and each request's grammar with its SequenceOpen; the device
// masks its draws there. A choice and a JSON schema answer as one process answers them.
TEST_F(Bootstrap, ServeWithAttentionOnOtherRanksGuidesAsOneProcess) {
  if (shell("command -v curl").exit_code != 0) GTEST_SKIP() << "curl not found (Debian package curl)";
  const std::string layout = (root_ / "remote-attention.toml").string();
  const std::string post = "curl -s --max-time 30 localhost:$port/v1/completions -H 'content-type: application/json' -d ";
  const std::string requests =
      post + "'{\"prompt\": [4, 5, 6], \"max_tokens\": 12, \"temperature\": 0, "
             "\"structured_outputs\": {\"choice\": [\"red\", \"green\", \"blue\"]}}' > $out-choice.json; " +
      post + "'{\"prompt\": [7, 8], \"max_tokens\": 40, \"temperature\": 0, \"response_format\": "
             "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"a\", \"schema\": {\"type\": \"object\", "
             "\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"], "
             "\"additionalProperties\": false}}}}' > $out-schema.json";
  const ShellRun one = shell("cd " + root_.string() + " && (" + bin_ + " serve --model " + (root_ / "model").string() +
                             " --layout " + layout + " --no-console --no-telemetry --port 0 > single.log 2>&1 & p=$!; "
                             "for i in $(seq 300); do grep -q 'OpenAI-compatible API at' single.log && break; sleep 0.1; done; "
                             "port=$(grep -o '127.0.0.1:[0-9]*' single.log | head -1 | cut -d: -f2); out=single; " +
                             requests + "; kill -TERM $p; wait $p)");
  serve_three_ranks(root_, bin_, "out=answer; " + requests + "; kill -TERM $p0", layout);
  const std::string log0 = read_file(root_ / "serve0.log"), log1 = read_file(root_ / "serve1.log");
  const auto choices = [](const std::string& body) {
    const std::string from = body.substr(body.find("\"choices\""));
    return from.substr(0, from.find("\"created\""));
  };
  for (const char* which : {"choice", "schema"}) {
    SCOPED_TRACE(which);
    const std::string expected = read_file(root_ / ("single-" + std::string(which) + ".json"));
    const std::string answer = read_file(root_ / ("answer-" + std::string(which) + ".json"));
    ASSERT_TRUE(has(expected, "\"choices\"")) << expected << read_file(root_ / "single.log");
    ASSERT_TRUE(has(answer, "\"choices\"")) << answer << log0 << log1;
    EXPECT_EQ(choices(answer), choices(expected)) << answer << "\nexpected " << expected;
    const nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << answer;
    const std::string text = j["choices"][0]["text"];
    if (std::string(which) == "choice") {
      EXPECT_TRUE(text == "red" || text == "green" || text == "blue") << text;
    } else if (j["choices"][0]["finish_reason"] == "stop") {
      const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
      EXPECT_TRUE(value.is_object() && value.size() == 1 && value["a"].is_number_integer()) << text;
    }
  }
  EXPECT_TRUE(has(read_file(root_ / "status.log"), "rank1=0")) << read_file(root_ / "status.log");
}

// The prompt's log-probabilities of a request whose attention device runs on rank 1 or 2 travel
// to rank 0's API too (message 32): echo and prompt_logprobs answer as one process does.
TEST_F(Bootstrap, ServeWithAttentionOnOtherRanksReturnsTheSamePromptLogprobs) {
  if (shell("command -v curl").exit_code != 0) GTEST_SKIP() << "curl not found (Debian package curl)";
  const std::string layout = (root_ / "remote-attention.toml").string();
  const std::string request =
      "curl -s --max-time 30 localhost:$port/v1/completions -H 'content-type: application/json' -d "
      "'{\"prompt\": [4, 5, 6, 7, 8], \"max_tokens\": 2, \"temperature\": 0, \"ignore_eos\": true, \"echo\": true, "
      "\"logprobs\": 2, \"prompt_logprobs\": 3}'";
  const ShellRun one = shell("cd " + root_.string() + " && (" + bin_ + " serve --model " + (root_ / "model").string() +
                             " --layout " + layout + " --no-console --no-telemetry --port 0 > single.log 2>&1 & p=$!; "
                             "for i in $(seq 300); do grep -q 'OpenAI-compatible API at' single.log && break; sleep 0.1; done; "
                             "port=$(grep -o '127.0.0.1:[0-9]*' single.log | head -1 | cut -d: -f2); " +
                             request + " > single.json; kill -TERM $p; wait $p)");
  const std::string expected = read_file(root_ / "single.json");
  ASSERT_TRUE(has(expected, "\"prompt_logprobs\":[null,{")) << expected << read_file(root_ / "single.log");
  ASSERT_TRUE(has(expected, "\"token_logprobs\":[null,")) << expected;
  serve_three_ranks(root_, bin_, request + " > answer.json; kill -TERM $p0", layout);
  const std::string answer = read_file(root_ / "answer.json"), log0 = read_file(root_ / "serve0.log");
  const auto choices = [](const std::string& body) { return body.substr(body.find("\"choices\"")); };
  ASSERT_TRUE(has(answer, "\"choices\"")) << answer << log0;
  EXPECT_EQ(choices(answer).substr(0, choices(answer).find("\"created\"")),
            choices(expected).substr(0, choices(expected).find("\"created\"")))
      << answer << "\nexpected " << expected;
  EXPECT_TRUE(has(read_file(root_ / "status.log"), "rank1=0")) << read_file(root_ / "status.log");
}

TEST_F(Bootstrap, AKilledRankEndsServeWithTheReasonAtTheClient) {
  if (shell("command -v curl").exit_code != 0) GTEST_SKIP() << "curl not found (Debian package curl)";
  // Streaming requests one after another until rank 0 is gone, so one is mid-generation when
  // rank 2 is killed.
  const ShellRun r = serve_three_ranks(
      root_, bin_,
      "(for i in $(seq 100); do curl -sN --max-time 40 localhost:$port/v1/completions -H 'content-type: "
      "application/json' -d '{\"prompt\": [1, 2], \"max_tokens\": 1900, \"temperature\": 0, \"ignore_eos\": "
      "true, \"stream\": true}' >> stream.txt || break; done) & c=$!; sleep 1; "
      "kill -9 $(grep -o 'rank 2 of 3 (env, pid [0-9]*' serve2.log | grep -o '[0-9]*$'); wait $c");
  const std::string status = read_file(root_ / "status.log"), stream = read_file(root_ / "stream.txt"),
                    log0 = read_file(root_ / "serve0.log");
  EXPECT_LT(r.seconds, 50) << status << log0;
  EXPECT_TRUE(has(status, "rank0=1")) << status << log0;
  EXPECT_TRUE(has(status, "rank1=0")) << status;  // told to stop by rank 0
  EXPECT_TRUE(has(stream, "\"code\":\"deployment_failed\"")) << stream.substr(stream.size() > 2000 ? stream.size() - 2000 : 0);
  EXPECT_TRUE(has(stream, "rank 2 stopped answering")) << stream.substr(stream.size() > 2000 ? stream.size() - 2000 : 0);
  EXPECT_TRUE(has(log0, "the deployment stopped: rank 2 stopped answering")) << log0;
  const double silent = reported_silence_ms(log0, 2);
  EXPECT_GT(silent, 0) << log0;
  EXPECT_LT(silent, 1000) << log0;
}

TEST_F(MultiProcess, DemoOnTheCpuBackendRunsUnderMpirunWithEveryDeviceReported) {
  const ShellRun r = shell(mpirun(3, free_port()) + bin_ + " demo --backend cpu --model " + (root_ / "model").string() +
                           " --layout " + kLayout + " --no-console --no-telemetry --duration 3 --rate 20");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "done: ")) << r.output;
  // Rank 0's summary table covers the devices of ranks 1 and 2 (relayed events).
  for (const char* device : {"gpu2", "gpu5"}) {
    const auto at = r.output.rfind(std::string("\n") + device + " ");
    ASSERT_NE(at, std::string::npos) << r.output;
    const std::string row = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
    std::istringstream fields(row);
    std::string name, busy, queue_empty, barrier, transfer, weights;
    long executions = 0;
    fields >> name >> busy >> queue_empty >> barrier >> transfer >> weights >> executions;
    EXPECT_GT(executions, 0) << row << "\n" << r.output;
  }
}

// A recording made by rank 0 holds every rank's devices and, in META, each rank's measured
// clock offset with its residual error (trace summarize prints them).
TEST_F(MultiProcess, ARecordingAcrossRanksHoldsEveryDeviceAndEachRanksClockOffset) {
  const fs::path trace = root_ / "ranks.db";
  fs::remove(trace);
  const ShellRun r = shell(mpirun(3, free_port()) + bin_ + " bench --model " + (root_ / "model").string() +
                           " --layout " + kLayout + " --workload short --rate 20 --duration 1 --record " +
                           trace.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const ShellRun summary = shell(bin_ + " trace summarize " + trace.string());
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_TRUE(has(summary.output, "processes: 3")) << summary.output;
  for (const char* rank : {"rank 1: 2 device(s), alive, clock offset to rank 0 ",
                           "rank 2: 2 device(s), alive, clock offset to rank 0 "})
    EXPECT_TRUE(has(summary.output, rank)) << summary.output;
  // The residual error is half the best round trip on this host: well under 10 ms.
  for (std::size_t at = summary.output.find("residual error under "); at != std::string::npos;
       at = summary.output.find("residual error under ", at + 1))
    EXPECT_LT(std::atof(summary.output.c_str() + at + 21), 10'000) << summary.output;
  // Devices of ranks 1 and 2 have their executions in the trace.
  for (const char* device : {"gpu2", "gpu5"}) {
    const auto at = summary.output.find(std::string("  ") + device + " ");
    ASSERT_NE(at, std::string::npos) << summary.output;
    std::istringstream row(summary.output.substr(at, summary.output.find('\n', at) - at));
    std::string name, busy, queue_empty, barrier, transfer, weights;
    long executions = 0;
    row >> name >> busy >> queue_empty >> barrier >> transfer >> weights >> executions;
    EXPECT_GT(executions, 0) << summary.output;
  }
}

TEST_F(MultiProcess, AKilledRankUnderMpirunLeavesNoProcessBehind) {
  const fs::path log = root_ / "mpirun.log";
  const std::string gen = generate(kLayout, "", root_ / "m.jsonl");
  const std::string long_gen = gen.substr(0, gen.find("--prompts")) + "--prompts " + (root_ / "long.jsonl").string() +
                               " --ignore-eos --out " + (root_ / "m.jsonl").string();
  const ShellRun r = shell(mpirun(3, free_port()) + bin_ + " " + long_gen + " > " + log.string() +
                           " 2>&1 & m=$!; for i in $(seq 200); do grep -q 'rank 2 of 3' " + log.string() +
                           " && break; sleep 0.1; done; sleep 1; "
                           "kill -9 $(grep -o 'rank 2 of 3 (mpirun, pid [0-9]*' " + log.string() +
                           " | grep -o '[0-9]*$'); wait $m; echo mpirun=$?");
  const std::string out = read_file(log);
  EXPECT_LT(r.seconds, 60) << out;
  EXPECT_FALSE(has(r.output, "mpirun=0")) << r.output << out;
  // Every rank's process is gone soon after mpirun returns.
  std::vector<pid_t> pids;
  for (std::size_t at = out.find("pid "); at != std::string::npos; at = out.find("pid ", at + 4))
    pids.push_back(static_cast<pid_t>(std::atol(out.c_str() + at + 4)));
  ASSERT_EQ(pids.size(), 3u) << out;
  for (pid_t p : pids) {
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      gone = ::kill(p, 0) != 0;
      if (!gone) ::usleep(50'000);
    }
    EXPECT_TRUE(gone) << "rank process " << p << " outlived mpirun\n" << out;
  }
}

}  // namespace
}  // namespace sy
