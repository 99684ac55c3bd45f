// Which GPU runs what, decided on the host (engine/cuda/gpu_assignment.h): the path a
// shipment's rows take, the GPUs a process uses, the checks that name a missing GPU or a rank
// spread over GPUs, and the weights and memory each GPU needs. No GPU needed.
#include <gtest/gtest.h>

#include "engine/cuda/cuda_executor.h"
#include "engine/cuda/gpu_assignment.h"
#include "engine/model/random_model.h"

namespace sy {
namespace {

ModelConfig tiny() { return preset_config(Arch::Mixtral, ModelPreset::Tiny, kernels::DType::BF16); }

// dev0, dev1 attention; dev2 .. dev5 experts.
Topology two_plus_four() { return Topology::disaggregated(tiny(), 2, 4); }

TEST(GpuAssignment, TransferPathFollowsProcessThenGpu) {
  Topology t = two_plus_four();
  const std::vector<int> gpus = {0, 1, 0, 1, 1, 1};
  EXPECT_EQ(transfer_path(t, gpus, 0, 2), TransferPath::SameGpu);
  EXPECT_EQ(transfer_path(t, gpus, 0, 3), TransferPath::BetweenGpus);
  EXPECT_EQ(transfer_path(t, gpus, 3, 0), TransferPath::BetweenGpus);
  EXPECT_EQ(transfer_path(t, gpus, 4, 5), TransferPath::SameGpu);
  EXPECT_EQ(transfer_path(t, {}, 0, 5), TransferPath::SameGpu) << "no assignments: every device on GPU 0";
  t.device_process = {0, 0, 0, 1, 1, 1};
  EXPECT_EQ(transfer_path(t, gpus, 0, 3), TransferPath::BetweenProcesses) << "another rank, whatever its GPU";
  EXPECT_EQ(transfer_path(t, {}, 2, 5), TransferPath::BetweenProcesses) << "another rank on the same GPU";
  EXPECT_EQ(transfer_path(t, gpus, 0, 1), TransferPath::BetweenGpus);
}

TEST(GpuAssignment, ProcessGpusAreTheDistinctGpusOfItsDevicesAscending) {
  Topology t = two_plus_four();
  EXPECT_EQ(process_gpus(t, {3, 1, 3, 0, 1, 1}, 0), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(process_gpus(t, {}, 0), (std::vector<int>{0}));
  t.device_process = {0, 0, 1, 1, 2, 2};
  EXPECT_EQ(process_gpus(t, {3, 1, 3, 0, 1, 1}, 1), (std::vector<int>{0, 3}));
  EXPECT_EQ(process_gpus(t, {3, 1, 3, 0, 1, 1}, 5), (std::vector<int>{})) << "a rank without devices";
}

TEST(GpuAssignment, AMissingGpuIsNamedWithTheDevice) {
  const Topology t = two_plus_four();
  EXPECT_TRUE(check_gpus(t, {0, 1, 0, 1, 0, 1}, 0, 2, false).ok());
  const Status s = check_gpus(t, {0, 1, 0, 2, 0, 1}, 0, 2, false);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device dev3 is on gpu 2, which does not exist"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("2 GPUs, 0 to 1"), std::string::npos) << s.message();
  EXPECT_FALSE(check_gpus(t, {0, 0, 0, -1, 0, 0}, 0, 2, false).ok());
  const Status wrong = check_gpus(t, {0, 0, 0}, 0, 2, false);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("3 GPU assignments for 6 devices"), std::string::npos) << wrong.message();
}

TEST(GpuAssignment, ARankUsesOneGpuAndOnlyItsOwnDevicesAreChecked) {
  Topology t = two_plus_four();
  t.device_process = {0, 0, 0, 1, 1, 1};
  // Rank 1's devices on gpu 1, rank 0's on gpu 0: each rank one GPU.
  const std::vector<int> split = {0, 0, 0, 1, 1, 1};
  EXPECT_TRUE(check_gpus(t, split, 0, 2, true).ok());
  EXPECT_TRUE(check_gpus(t, split, 1, 2, true).ok());
  // A machine of one GPU checks rank 0 fine; rank 1's gpu 1 is missing there.
  EXPECT_TRUE(check_gpus(t, split, 0, 1, true).ok());
  EXPECT_FALSE(check_gpus(t, split, 1, 1, true).ok());
  const Status s = check_gpus(t, {0, 0, 0, 1, 0, 1}, 1, 2, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("device dev4 is on gpu 0 and device dev3 on gpu 1, both on rank 1"), std::string::npos)
      << s.message();
  EXPECT_TRUE(check_gpus(t, {0, 0, 0, 1, 0, 1}, 1, 2, false).ok()) << "one process may use several GPUs";
}

TEST(GpuAssignment, EachGpuNeedsTheWeightsAndMemoryOfItsOwnDevices) {
  const ModelConfig c = tiny();
  Topology t = two_plus_four();
  const std::vector<int> gpus = {0, 1, 1, 1, 2, 2};  // gpu 0: dev0; gpu 1: dev1, dev2, dev3; gpu 2: dev4, dev5
  const DeviceModelNeeds g0 = gpu_needs(c, t, gpus, 0, 0, 64, 16);
  const DeviceModelNeeds g1 = gpu_needs(c, t, gpus, 0, 1, 64, 16);
  const DeviceModelNeeds g2 = gpu_needs(c, t, gpus, 0, 2, 64, 16);
  const DeviceModelNeeds none = gpu_needs(c, t, gpus, 0, 3, 64, 16);
  EXPECT_TRUE(g0.attention);
  EXPECT_TRUE(g1.attention);
  EXPECT_FALSE(g2.attention) << "only expert devices there";
  EXPECT_EQ(g0.who, "gpu 0 (dev0)");
  EXPECT_EQ(g1.who, "gpu 1 (dev1, dev2, dev3)");
  EXPECT_EQ(g2.who, "gpu 2 (dev4, dev5)");
  for (const DeviceModelNeeds* n : {&g0, &g1, &g2}) {
    ASSERT_EQ(n->experts.size(), static_cast<std::size_t>(c.num_layers)) << n->who;
    for (const auto& layer : n->experts) EXPECT_EQ(layer, std::vector<bool>(static_cast<std::size_t>(c.num_experts), true));
  }
  EXPECT_FALSE(none.attention);
  EXPECT_TRUE(none.experts.empty()) << "a GPU without devices holds nothing";
  EXPECT_EQ(none.other_bytes, 0);
  // One attention rank's KV cache and buffers on gpu 0; gpu 1 adds two expert workers' share.
  const std::int64_t attention = CudaExecutor::kv_bytes(c, 64, 16) + CudaExecutor::fixed_bytes(c, true, 64);
  const std::int64_t expert = CudaExecutor::fixed_bytes(c, false, 0);
  const std::int64_t scratch = g0.other_bytes - attention;
  EXPECT_GT(scratch, 0);
  EXPECT_EQ(g1.other_bytes, attention + 2 * expert + 3 * scratch);
  EXPECT_EQ(g2.other_bytes, 2 * expert + 2 * scratch);
  // Another rank's devices are not this process's to hold.
  t.device_process = {0, 1, 1, 1, 1, 1};
  EXPECT_EQ(gpu_needs(c, t, gpus, 0, 1, 64, 16).who, "gpu 1 ()");
  EXPECT_EQ(gpu_needs(c, t, gpus, 1, 1, 64, 16).who, "gpu 1 (dev1, dev2, dev3)");
}

}  // namespace
}  // namespace sy
