// The sim backend's clock: how long a kernel of a given model shape takes on a device profile,
// by the roofline of its FLOPs and bytes with a small-batch efficiency curve for the GEMMs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sim/cost_model.h"
#include "engine/model/model_config.h"
#include "engine/sim/hardware_profile.h"

namespace sy {

// What a synchronous expert-parallel engine of AMoE's time (SGLang's EP, NCCL all-to-all)
// pays outside its kernels, for RooflineCostModel::collective_ns / iteration_host_ns.
struct SyncBaselineCosts {
  std::int64_t collective_ns = 0;
  std::int64_t host_ns = 0;
};
// Host scheduling of one decode iteration: 1 ms (batch preparation, output processing and the
// next launch on the CPU while the GPU waits, as a Python scheduler that does not overlap them
// with the GPU pays; an assumption, the AMoE paper does not measure SGLang's).
inline constexpr double kSyncHostSchedulingUs = 1000;
// An all-to-all over `devices` devices of `hw`, `devices_per_node` to a node (0: one node): a
// kernel launch plus one link latency per peer (NCCL posts a send and a receive per peer; the
// handshakes are serialised on each device's proxy), NVLink (or PCIe) within the node, the NIC
// beyond; and kSyncHostSchedulingUs per iteration.
SyncBaselineCosts sync_baseline_costs(const HardwareProfile& hw, std::int32_t devices, std::int32_t devices_per_node);

class RooflineCostModel final : public CostModel {
 public:
  // bf16 weights, activations and KV cache, as every paper's setup. tensor_parallel splits each
  // kernel's FLOPs and bytes over that many devices of one node (its all-reduce is not modelled).
  RooflineCostModel(const HardwareProfile& profile, const ModelConfig& config, std::int32_t tensor_parallel = 1,
                    SyncBaselineCosts sync = {});

  std::int64_t attention_ns(std::int32_t block, std::int64_t tokens, std::int64_t context) const override;
  std::int64_t experts_ns(std::int32_t block, std::span<const std::int64_t> tokens_per_expert) const override;
  std::int64_t shared_expert_ns(std::int32_t block, std::int64_t tokens) const override;
  std::int64_t sample_ns(std::int64_t tokens) const override;
  std::int64_t collective_ns() const override { return sync_.collective_ns; }
  std::int64_t iteration_host_ns() const override { return sync_.host_ns; }

  // Tabulates, for 0..max_rows rows, the terms of attention_ns, experts_ns and sample_ns that
  // depend on the row count alone, so that the simulator's calls (one per execution) skip their
  // GEMM and streaming arithmetic. The results stay the same bits: each term is computed as the
  // call computes it and added in the same order. Call before the model is shared (it is not
  // synchronised); a planner that builds many short-lived models need not call it.
  void tabulate_rows(std::int64_t max_rows);

  // One GEMM of a [params]-sized bf16 weight over `tokens` rows: max(compute, weight streaming)
  // plus the kernel overhead. Compute runs at peak · gemm_efficiency · n / (n + half_tokens).
  double gemm_ns(double params, double tokens) const;
  // Reading `bytes` from HBM at its achievable bandwidth.
  double stream_ns(double bytes) const;

 private:
  double shared_ns(std::int32_t block, double tokens) const;
  // attention_ns's terms in the order they are summed, but for the context's.
  double projections_ns(double n) const;
  double elementwise_ns(double n) const;
  double context_ns(double context) const;
  double expert_ns(double rows) const;  // one expert's share of experts_ns
  struct RowTerms {
    double projections = 0, elementwise = 0, router = 0, dense_mlp = 0, shared = 0, expert = 0, sample = 0;
  };
  std::vector<RowTerms> rows_;  // [rows], from tabulate_rows; empty: computed per call
  HardwareProfile hw_;
  ModelConfig config_;
  double tp_;
  SyncBaselineCosts sync_;
};

}  // namespace sy
