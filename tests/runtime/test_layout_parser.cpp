// Layout files: the shipped layouts against a Mixtral-like and a Qwen3-like model, what the
// format accepts, and every refusal with its message (file, line, problem).
#include <gtest/gtest.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/runtime/layout_parser.h"
#include "engine/runtime/topology.h"
#include "tests/runtime/layout_round_trip.h"
#include "tests/runtime/test_configs.h"

namespace sy {
namespace {

using testing::mixtral_like;
using testing::qwen3_like;
using testing::expect_round_trip;

const std::filesystem::path kLayouts = std::filesystem::path(SY_SOURCE_DIR) / "layouts";

// Two attention devices and two expert devices sharing all experts: valid for both models.
const std::string kDevices = R"(
[[device]]
name = "a0"
attention = true
[[device]]
name = "a1"
attention = true
[[device]]
name = "e0"
experts = "auto"
[[device]]
name = "e1"
experts = "auto"
)";

StatusOr<Layout> parse(const std::string& text, const ModelConfig& config = mixtral_like()) {
  return parse_layout(text, "test.toml", config);
}

// The text is refused with a message containing every fragment.
void expect_refused(const std::string& text, std::initializer_list<std::string> fragments,
                    const ModelConfig& config = mixtral_like()) {
  auto layout = parse(text, config);
  ASSERT_FALSE(layout.ok()) << "accepted:\n" << text;
  for (const std::string& f : fragments)
    EXPECT_NE(layout.status().message().find(f), std::string::npos)
        << "message: " << layout.status().message() << "\nmissing: " << f;
}

std::vector<std::int32_t> experts_in_block(const Layout& l, std::int32_t device, std::int32_t block) {
  std::vector<std::int32_t> out;
  for (const BlockExpert& be : l.placement.experts_on(device))
    if (be.block == block) out.push_back(be.expert);
  return out;
}

// ---- shipped layouts -------------------------------------------------------------------

TEST(ShippedLayouts, DisaggregatedDealsExpertsRoundRobinToExpertDevices) {
  for (const ModelConfig& config : {mixtral_like(), qwen3_like()}) {
    auto l = load_layout(kLayouts / "disaggregated-2a4e.toml", config);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_EQ(l->name, "2 attention + 4 expert devices (disaggregated, async)");
    ASSERT_EQ(l->num_devices(), 6);
    EXPECT_EQ(l->num_attention_ranks(), 2);
    EXPECT_EQ(l->attention_devices(), (std::vector<std::int32_t>{0, 1}));
    EXPECT_EQ(l->devices[1].attention_rank, 1);
    EXPECT_EQ(l->devices[2].attention_rank, -1);
    EXPECT_FALSE(l->devices[0].holds_experts);
    EXPECT_TRUE(l->devices[5].holds_experts);
    EXPECT_EQ(l->device_index("gpu4"), 4);
    EXPECT_EQ(l->device_index("gpu9"), -1);
    for (std::int32_t b = 0; b < config.num_layers; ++b) {
      for (std::int32_t e = 0; e < config.num_experts; ++e) {
        const auto expected = config.is_sparse(b) ? std::vector<std::int32_t>{2 + e % 4} : std::vector<std::int32_t>{};
        EXPECT_EQ(l->placement.devices(b, e), expected) << "block " << b << " expert " << e;
      }
    }
    EXPECT_EQ(l->policy, (PolicySpec{"async", "defrag", 3, 1.0, 2}));
    EXPECT_EQ(l->capacity, (CapacitySpec{4096, 16, 64}));
    expect_round_trip(*l, config);
  }
  // Hand-checked: with 16 experts, gpu3 holds 1, 5, 9, 13 in each sparse block of the Qwen3-like
  // model and nothing in its dense blocks 0 and 2.
  auto q = load_layout(kLayouts / "disaggregated-2a4e.toml", qwen3_like());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(experts_in_block(*q, 3, 1), (std::vector<std::int32_t>{1, 5, 9, 13}));
  EXPECT_EQ(experts_in_block(*q, 3, 5), (std::vector<std::int32_t>{1, 5, 9, 13}));
  EXPECT_TRUE(experts_in_block(*q, 3, 0).empty());
  EXPECT_TRUE(experts_in_block(*q, 3, 2).empty());
  EXPECT_EQ(q->placement.experts_on(3).size(), 16u);  // 4 sparse blocks x 4 experts
}

TEST(ShippedLayouts, ColocatedRunsAttentionAndExpertsOnEveryDevice) {
  for (const ModelConfig& config : {mixtral_like(), qwen3_like()}) {
    auto l = load_layout(kLayouts / "colocated-4.toml", config);
    ASSERT_TRUE(l.ok()) << l.status().message();
    ASSERT_EQ(l->num_devices(), 4);
    EXPECT_EQ(l->num_attention_ranks(), 4);
    for (std::int32_t d = 0; d < 4; ++d) {
      EXPECT_EQ(l->devices[d].attention_rank, d);
      EXPECT_TRUE(l->devices[d].holds_experts);
    }
    EXPECT_EQ(l->placement.devices(config.num_layers - 1, 6), (std::vector<std::int32_t>{2}));
    EXPECT_EQ(l->policy.policy, "sync");
    expect_round_trip(*l, config);
  }
}

TEST(ShippedLayouts, PingPongUsesTwoMicrobatches) {
  for (const ModelConfig& config : {mixtral_like(), qwen3_like()}) {
    auto l = load_layout(kLayouts / "pingpong-2a4e.toml", config);
    ASSERT_TRUE(l.ok()) << l.status().message();
    EXPECT_EQ(l->policy.policy, "pingpong");
    EXPECT_EQ(l->policy.microbatches, 2);
    EXPECT_EQ(l->policy.scheduler, "defrag");  // defaults kept for a later switch to async
    EXPECT_EQ(l->num_attention_ranks(), 2);
    expect_round_trip(*l, config);
  }
}

TEST(ShippedLayouts, ReplicatedCopiesExpertZeroInEverySparseBlock) {
  for (const ModelConfig& config : {mixtral_like(), qwen3_like()}) {
    auto l = load_layout(kLayouts / "replicated-2a4e.toml", config);
    ASSERT_TRUE(l.ok()) << l.status().message();
    for (std::int32_t b = 0; b < config.num_layers; ++b) {
      if (!config.is_sparse(b)) continue;
      EXPECT_EQ(l->placement.devices(b, 0), (std::vector<std::int32_t>{2, 3}));
      EXPECT_EQ(l->placement.devices(b, 1), (std::vector<std::int32_t>{3}));
    }
    expect_round_trip(*l, config);
  }
}

TEST(ShippedLayouts, EveryTomlFileInLayoutsLoads) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kLayouts)) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    for (const ModelConfig& config : {mixtral_like(), qwen3_like()}) {
      auto l = load_layout(entry.path(), config);
      EXPECT_TRUE(l.ok()) << entry.path() << ": " << l.status().message();
    }
  }
  EXPECT_GE(files, 4);
}

// ---- what the format accepts ---------------------------------------------------------------

TEST(LayoutFormat, DefaultsApplyAndNameFallsBackToTheFileName) {
  auto l = parse(kDevices);
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->name, "test");
  EXPECT_EQ(l->policy, PolicySpec{});
  EXPECT_EQ(l->capacity, CapacitySpec{});
}

TEST(LayoutFormat, ExplicitListsMixWithAutoAndListedTwiceMeansTwoCopies) {
  auto l = parse(R"(
[[device]]
name = "a"
attention = true
experts = [7]
[[device]]
name = "x"
experts = [0, 1, 2, 3]
[[device]]
name = "y"
experts = [3, 4, 5, 6, 7]
)");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->placement.devices(0, 3), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(l->placement.devices(2, 7), (std::vector<std::int32_t>{0, 2}));
  EXPECT_TRUE(l->devices[0].holds_experts);

  auto mixed = parse(R"(
[[device]]
name = "a"
attention = true
experts = [0]
[[device]]
name = "x"
experts = "auto"
)");
  ASSERT_TRUE(mixed.ok()) << mixed.status().message();
  EXPECT_EQ(mixed->placement.devices(1, 0), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(mixed->placement.devices(1, 5), (std::vector<std::int32_t>{1}));
}

TEST(LayoutFormat, ReplicasThenOverridesPerBlock) {
  auto l = parse(kDevices + R"(
[[replica]]
expert = 2
devices = ["a0", "e1"]
blocks = [1, 3]
[[replica]]
expert = 5
devices = ["a1"]
[[override]]
block = 3
expert = 2
devices = ["e1"]
)");
  ASSERT_TRUE(l.ok()) << l.status().message();
  // e0 = device 2 holds even experts, e1 = device 3 odd ones.
  EXPECT_EQ(l->placement.devices(0, 2), (std::vector<std::int32_t>{2}));
  EXPECT_EQ(l->placement.devices(1, 2), (std::vector<std::int32_t>{0, 2, 3}));
  EXPECT_EQ(l->placement.devices(3, 2), (std::vector<std::int32_t>{3}));  // the override replaced all copies
  for (std::int32_t b = 0; b < 4; ++b) EXPECT_EQ(l->placement.devices(b, 5), (std::vector<std::int32_t>{1, 3}));
  EXPECT_TRUE(l->devices[0].holds_experts);
  EXPECT_EQ(l->placement.experts_on(0), (std::vector<BlockExpert>{{1, 2}}));
  expect_round_trip(*l, mixtral_like());
}

TEST(LayoutFormat, ADeviceMayHoldExpertsOnlyThroughOverridesOrReplicas) {
  auto l = parse(kDevices + R"(
[[device]]
name = "spare"
[[override]]
block = 1
expert = 4
devices = ["spare"]
)");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_TRUE(l->devices[4].holds_experts);
  EXPECT_EQ(l->placement.experts_on(4), (std::vector<BlockExpert>{{1, 4}}));
  expect_round_trip(*l, mixtral_like());
}

TEST(LayoutFormat, IntegerDecayIsANumber) {
  auto l = parse(kDevices + "[policy]\ndecay = 1\nlookahead = 0\n");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->policy.decay, 1.0);
  EXPECT_EQ(l->policy.lookahead, 0);
}

// memory_gb: what expert weights a device may take (placement that moves weights); it
// reaches the topology in bytes and survives the to_toml round trip.
TEST(LayoutFormat, DeviceMemoryInGigabytes) {
  std::string text = kDevices;
  text.insert(text.find("experts = \"auto\"") + 16, "\nmemory_gb = 80");
  text.insert(text.rfind("experts = \"auto\"") + 16, "\nmemory_gb = 0.5");
  auto l = parse(text);
  ASSERT_TRUE(l.ok()) << l.status().message() << "\n" << text;
  EXPECT_EQ(l->devices[0].memory_gb, 0);
  EXPECT_EQ(l->devices[2].memory_gb, 80.0);
  EXPECT_EQ(l->devices[3].memory_gb, 0.5);
  const Topology t = Topology::from_layout(*l, mixtral_like());
  EXPECT_EQ(t.device_memory_bytes, (std::vector<std::int64_t>{0, 0, 80'000'000'000, 500'000'000}));
  testing::expect_round_trip(*l, mixtral_like());
  std::string bad = kDevices;
  bad.insert(bad.find("experts = \"auto\"") + 16, "\nmemory_gb = -1");
  expect_refused(bad, {"test.toml:", "device 'e0': memory_gb must be a positive number of GB"});
  bad = kDevices;
  bad.insert(bad.find("experts = \"auto\"") + 16, "\nmemory_gb = \"lots\"");
  expect_refused(bad, {"memory_gb must be a positive number of GB, got a string"});
}

TEST(LayoutFormat, GpuKeyPlacesDevicesOnGpus) {
  auto l = parse("[[device]]\nname = \"a\"\nattention = true\ngpu = 1\n[[device]]\nname = \"e\"\nexperts = \"auto\"\n");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->devices[0].gpu, 1);
  EXPECT_EQ(l->devices[1].gpu, -1);  // unset: the command's --gpu
  const Topology t = Topology::from_layout(*l, mixtral_like());
  EXPECT_EQ(t.device_gpu, (std::vector<std::int32_t>{1, -1}));
  sy::testing::expect_round_trip(*l, mixtral_like());
  expect_refused("[[device]]\nname = \"a\"\nattention = true\ngpu = -1\n", {"device 'a': gpu must be in [0,"});
  expect_refused("[[device]]\nname = \"a\"\nattention = true\ngpu = \"0\"\n", {"device 'a': gpu must be an integer"});
}

// ---- refusals ----------------------------------------------------------------------------

TEST(LayoutRefusals, TomlSyntaxErrorNamesFileLineAndColumn) {
  expect_refused("[[device]]\nname = \"a\"\nattention = tru\n", {"test.toml:3:", "TOML syntax error"});
  expect_refused("name = \"unterminated\n", {"test.toml:1:", "TOML syntax error"});
}

TEST(LayoutRefusals, UnknownKeysAreTyposNotIgnored) {
  expect_refused(kDevices + "[polcy]\nname = \"sync\"\n",
                 {"test.toml:14:", "unknown key 'polcy' in the layout", "did you mean 'policy'?"});
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexpert = [0]\n",
                 {"test.toml:4:", "unknown key 'expert' in [[device]] #1", "did you mean 'experts'?"});
  expect_refused(kDevices + "[policy]\nschedular = \"mtfs\"\n", {"test.toml:15:", "unknown key 'schedular' in [policy]",
                                                                  "did you mean 'scheduler'?"});
  expect_refused(kDevices + "[capacity]\nmax_batches = 3\n", {"unknown key 'max_batches' in [capacity]"});
  expect_refused(kDevices + "[[replica]]\nexpert = 1\ndevices = [\"a0\"]\nblock = [1]\n",
                 {"unknown key 'block' in [[replica]] #1", "did you mean 'blocks'?"});
  expect_refused(kDevices + "[[override]]\nblock = 1\nexpert = 1\ndevice = [\"a0\"]\n",
                 {"unknown key 'device' in [[override]] #1", "did you mean 'devices'?"});
  expect_refused(kDevices + "colour = \"red\"\n", {"unknown key 'colour'"});
}

TEST(LayoutRefusals, WrongTypes) {
  expect_refused("[[device]]\nname = \"a\"\nattention = \"yes\"\n",
                 {"test.toml:3:", "device 'a': attention must be true or false, got a string"});
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = \"all\"\n",
                 {"experts must be a list of expert ids or \"auto\", got \"all\""});
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = 3\n",
                 {"experts must be a list of expert ids or \"auto\", got an integer"});
  expect_refused("[[device]]\nname = 5\nattention = true\n", {"[[device]] #1: name must be a string, got an integer"});
  expect_refused("[device]\nname = \"a\"\nattention = true\n", {"'device' must be written as [[device]] tables"});
  expect_refused("name = 3\n" + kDevices, {"test.toml:1:", "name must be a string"});
  expect_refused("policy = \"async\"\n" + kDevices, {"test.toml:1:", "'policy' must be a [policy] table, got a string"});
  // After a [[device]] header a key belongs to that device, whatever it is called.
  expect_refused(kDevices + "policy = \"async\"\n", {"test.toml:14:", "unknown key 'policy' in [[device]] #4"});
  expect_refused(kDevices + "[policy]\nlookahead = 2.5\n", {"policy.lookahead must be an integer, got a float"});
  expect_refused(kDevices + "[policy]\ndecay = \"half\"\n", {"policy.decay must be a number, got a string"});
  expect_refused(kDevices + "[policy]\nname = 1\n", {"policy.name must be a string"});
  expect_refused(kDevices + "[[replica]]\nexpert = 1\ndevices = \"a0\"\n",
                 {"replica of expert 1: devices must be a list of device names, got a string"});
  expect_refused(kDevices + "[[replica]]\nexpert = 1\ndevices = [\"a0\"]\nblocks = \"some\"\n",
                 {"blocks must be \"all\" or a list of block indices"});
}

TEST(LayoutRefusals, DevicesNeedUniqueNames) {
  expect_refused("[[device]]\nname = \"gpu0\"\nattention = true\n[[device]]\nname = \"gpu0\"\nexperts = \"auto\"\n",
                 {"test.toml:5:", "duplicate device name 'gpu0' (first defined on line 2)"});
  expect_refused("[[device]]\nattention = true\n", {"test.toml:1:", "[[device]] #1 has no name"});
  expect_refused("[[device]]\nname = \"\"\nattention = true\n", {"name must be non-empty"});
}

TEST(LayoutRefusals, AtLeastOneAttentionDevice) {
  expect_refused("[[device]]\nname = \"x\"\nexperts = \"auto\"\n", {"test.toml: no device runs attention"});
  expect_refused("name = \"empty\"\n", {"test.toml: no [[device]] tables"});
}

TEST(LayoutRefusals, ExpertIdsMustExistInTheModel) {
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = [0, 8]\n",
                 {"test.toml:4:", "device 'a': an entry of experts is expert 8, but the model has 8 experts (ids 0-7)"});
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = [-1]\n", {"is expert -1"});
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = [16]\n", {"the model has 16 experts (ids 0-15)"},
                 qwen3_like());
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = [1, 1]\n", {"device 'a' lists expert 1 twice"});
  expect_refused(kDevices + "[[replica]]\nexpert = 8\ndevices = [\"a0\"]\n",
                 {"test.toml:15:", "[[replica]] #1: expert is expert 8, but the model has 8 experts"});
  expect_refused(kDevices + "[[override]]\nblock = 1\nexpert = 9\ndevices = [\"a0\"]\n",
                 {"[[override]] #1: expert is expert 9"});
  expect_refused(kDevices + "[[replica]]\nexpert = \"hot\"\ndevices = [\"a0\"]\n",
                 {"expert must be an expert id (integer), got a string"});
}

TEST(LayoutRefusals, ReplicasAndOverridesNameKnownDevices) {
  expect_refused(kDevices + "[[replica]]\nexpert = 0\ndevices = [\"e3\"]\n",
                 {"test.toml:16:", "replica of expert 0 names unknown device 'e3' (devices: a0, a1, e0, e1)"});
  expect_refused(kDevices + "[[override]]\nblock = 2\nexpert = 5\ndevices = [\"e0\", \"gpu7\"]\n",
                 {"test.toml:17:", "override of block 2 expert 5 names unknown device 'gpu7'"});
  expect_refused(kDevices + "[[override]]\nblock = 2\nexpert = 5\ndevices = [\"e0\", \"e0\"]\n",
                 {"override of block 2 expert 5 lists device 'e0' twice"});
  expect_refused(kDevices + "[[override]]\nblock = 2\nexpert = 5\ndevices = []\n",
                 {"override of block 2 expert 5: devices is empty (the expert would be placed nowhere)"});
  expect_refused(kDevices + "[[override]]\nblock = 2\nexpert = 5\n", {"override of block 2 expert 5 has no 'devices'"});
  expect_refused(kDevices + "[[replica]]\ndevices = [\"a0\"]\n", {"[[replica]] #1 has no expert"});
  expect_refused(kDevices + "[[override]]\nexpert = 1\ndevices = [\"a0\"]\n", {"[[override]] #1 has no block"});
}

TEST(LayoutRefusals, OverridesAndReplicasOnlyInSparseBlocksOfTheModel) {
  const ModelConfig q = qwen3_like();  // blocks 0 and 2 are dense
  expect_refused(kDevices + "[[override]]\nblock = 0\nexpert = 1\ndevices = [\"a0\"]\n",
                 {"test.toml:15:", "[[override]] #1: block is block 0, a dense block (it has no experts)"}, q);
  expect_refused(kDevices + "[[override]]\nblock = 6\nexpert = 1\ndevices = [\"a0\"]\n",
                 {"block is block 6, but the model has 6 blocks (0-5)"}, q);
  expect_refused(kDevices + "[[override]]\nblock = 4\nexpert = 1\ndevices = [\"a0\"]\n",
                 {"block is block 4, but the model has 4 blocks (0-3)"});
  expect_refused(kDevices + "[[override]]\nblock = -1\nexpert = 1\ndevices = [\"a0\"]\n", {"block is block -1"});
  expect_refused(kDevices + "[[replica]]\nexpert = 1\ndevices = [\"a0\"]\nblocks = [1, 2]\n",
                 {"test.toml:17:", "replica of expert 1: an entry of blocks is block 2, a dense block"}, q);
  expect_refused(kDevices + "[[replica]]\nexpert = 1\ndevices = [\"a0\"]\nblocks = []\n", {"blocks is empty"}, q);
  // "all" skips the dense blocks instead of refusing them.
  auto ok = parse(kDevices + "[[replica]]\nexpert = 1\ndevices = [\"a0\"]\nblocks = \"all\"\n", q);
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->placement.experts_on(0).size(), 4u);
}

TEST(LayoutRefusals, OneOverridePerBlockAndExpertAndNoDuplicateCopies) {
  expect_refused(kDevices + "[[override]]\nblock = 1\nexpert = 1\ndevices = [\"a0\"]\n"
                            "[[override]]\nblock = 1\nexpert = 1\ndevices = [\"a1\"]\n",
                 {"test.toml:18:", "second override of block 1 expert 1 (the first is on line 14)"});
  expect_refused(kDevices + "[[replica]]\nexpert = 2\ndevices = [\"e0\"]\n",
                 {"test.toml:14:", "replica of expert 2 on 'e0': the device already holds expert 2 in block 0"});
}

TEST(LayoutRefusals, EveryExpertOfEverySparseBlockIsPlaced) {
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = [0, 1, 2, 3, 4, 5, 6]\n",
                 {"test.toml: block 0 expert 7 is placed on no device"});
  // Qwen3-like: block 0 is dense, so the first hole is in block 1.
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n",
                 {"block 1 expert 10 is placed on no device"}, qwen3_like());
  // An override that moves the only copy elsewhere still places it; one on a single block
  // leaves other blocks' holes visible.
  expect_refused("[[device]]\nname = \"a\"\nattention = true\nexperts = [0, 1, 2, 3, 4, 5, 6]\n"
                 "[[override]]\nblock = 0\nexpert = 7\ndevices = [\"a\"]\n",
                 {"block 1 expert 7 is placed on no device"});
  // No experts anywhere.
  expect_refused("[[device]]\nname = \"a\"\nattention = true\n", {"block 0 expert 0 is placed on no device"});
}

TEST(LayoutRefusals, DeviceWithoutARole) {
  expect_refused(kDevices + "[[device]]\nname = \"idle\"\n",
                 {"test.toml:14:", "device 'idle' neither runs attention nor holds any expert"});
  // Its only expert overridden away: no role left.
  expect_refused(R"([[device]]
name = "a"
attention = true
experts = "auto"
[[device]]
name = "b"
experts = [3]
[[override]]
block = 0
expert = 3
devices = ["a"]
[[override]]
block = 1
expert = 3
devices = ["a"]
[[override]]
block = 2
expert = 3
devices = ["a"]
[[override]]
block = 3
expert = 3
devices = ["a"]
)",
                 {"test.toml:5:", "device 'b' neither runs attention nor holds any expert"});
}

TEST(LayoutRefusals, BadPolicyValues) {
  expect_refused(kDevices + "[policy]\nname = \"turbo\"\n",
                 {"test.toml:14:", "[policy]: unknown policy 'turbo' (expected async, pingpong, sync, findep or adaptive)"});
  expect_refused(kDevices + "[policy]\nscheduler = \"fifo\"\n", {"unknown scheduler 'fifo' (expected defrag, mtfs, flfs or tail)"});
  // Ranges on the key's own line, with the range that holds (lookahead's top is 1024, not the
  // int32 top it was read with; decay's and the thresholds' were only on the table's line).
  expect_refused(kDevices + "[policy]\nlookahead = -1\n", {"test.toml:15:", "policy.lookahead must be in [0, 1024], got -1"});
  expect_refused(kDevices + "[policy]\nlookahead = 1025\n", {"test.toml:15:", "policy.lookahead must be in [0, 1024], got 1025"});
  expect_refused(kDevices + "[policy]\ndecay = 0.0\n", {"test.toml:15:", "policy.decay must be in (0, 1], got 0.0"});
  expect_refused(kDevices + "[policy]\ndecay = 1.5\n", {"test.toml:15:", "policy.decay must be in (0, 1], got 1.5"});
  expect_refused(kDevices + "[policy]\ndecay = nan\n", {"test.toml:15:", "decay must be in (0, 1]"});
  expect_refused(kDevices + "[policy]\nadaptive_async_from = -2\n",
                 {"test.toml:15:", "policy.adaptive_async_from must be >= 0, got -2"});
  expect_refused(kDevices + "[policy]\nmicrobatches = 0\n", {"test.toml:15:", "policy.microbatches must be in [1, 64], got 0"});
  expect_refused(kDevices + "[policy]\nmicrobatches = 65\n", {"policy.microbatches must be in [1, 64], got 65"});
}

TEST(LayoutRefusals, BadCapacityValues) {
  expect_refused(kDevices + "[capacity]\npage_size = 0\n", {"test.toml:15:", "capacity.page_size must be in [1, 2147483647], got 0"});
  expect_refused(kDevices + "[capacity]\nkv_pages_per_rank = -4\n", {"capacity.kv_pages_per_rank must be in [1,"});
  expect_refused(kDevices + "[capacity]\nmax_batch = 3000000000\n", {"capacity.max_batch must be in [1, 2147483647]"});
}

TEST(LayoutRefusals, MissingFileAndBrokenModelConfig) {
  auto l = load_layout("/nonexistent/layout.toml", mixtral_like());
  ASSERT_FALSE(l.ok());
  EXPECT_NE(l.status().message().find("cannot open layout file /nonexistent/layout.toml"), std::string::npos);
  ModelConfig broken = mixtral_like();
  broken.sparse_layers.pop_back();
  auto b = parse(kDevices, broken);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("sparse_layers has 3 entries for 4 layers"), std::string::npos);
}

}  // namespace
}  // namespace sy
