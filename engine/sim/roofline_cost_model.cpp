#include "engine/sim/roofline_cost_model.h"

#include <algorithm>
#include <cmath>

namespace sy {
namespace {
constexpr double kBytes = 2.0;  // bf16
}

SyncBaselineCosts sync_baseline_costs(const HardwareProfile& hw, std::int32_t devices, std::int32_t devices_per_node) {
  const std::int32_t per_node = devices_per_node > 0 ? std::min(devices_per_node, devices) : devices;
  const double local = hw.nvlink_gbps > 0 ? hw.nvlink_latency_us : hw.nic_latency_us;  // PCIe: as the profile's links
  const double us = hw.kernel_overhead_us + std::max(0, per_node - 1) * local +
                    std::max(0, devices - per_node) * hw.nic_latency_us;
  return {static_cast<std::int64_t>(std::ceil(us * 1e3)), static_cast<std::int64_t>(kSyncHostSchedulingUs * 1e3)};
}

RooflineCostModel::RooflineCostModel(const HardwareProfile& profile, const ModelConfig& config,
                                     std::int32_t tensor_parallel, SyncBaselineCosts sync)
    : hw_(profile), config_(config), tp_(std::max(1, tensor_parallel)), sync_(sync) {}

double RooflineCostModel::stream_ns(double bytes) const {
  return bytes / (hw_.hbm_gbps * hw_.hbm_efficiency);  // GB/s == bytes/ns
}

double RooflineCostModel::gemm_ns(double params, double tokens) const {
  if (tokens <= 0) return 0;
  params /= tp_;
  const double efficiency = hw_.gemm_efficiency * tokens / (tokens + hw_.gemm_half_tokens);
  const double compute = 2.0 * params * tokens / (hw_.bf16_tflops * 1e3 * efficiency);  // TFLOP/s == 1e3 FLOP/ns
  const double memory = stream_ns(params * kBytes);
  return std::max(compute, memory) + hw_.kernel_overhead_us * 1e3;
}

double RooflineCostModel::projections_ns(double n) const {
  const ModelConfig& c = config_;
  const double H = c.hidden_size;
  const double q = static_cast<double>(c.num_heads) * c.head_dim, kv = static_cast<double>(c.num_kv_heads) * c.head_dim;
  // QKV and output projections.
  return gemm_ns(H * (q + 2 * kv), n) + gemm_ns(q * H, n);
}

double RooflineCostModel::context_ns(double ctx) const {
  // The attention core reads every cached K and V once per (sequence, kv head); its FLOPs are
  // 4 · heads · head_dim per (query row, cached position). Decode is bound by the KV read.
  const ModelConfig& c = config_;
  const double kv = static_cast<double>(c.num_kv_heads) * c.head_dim;
  const double kv_bytes = ctx * 2 * kv * kBytes / tp_;
  const double core_flops = 4.0 * static_cast<double>(c.num_heads) * c.head_dim * ctx / tp_;
  return std::max(stream_ns(kv_bytes), core_flops / (hw_.bf16_tflops * 1e3 * hw_.gemm_efficiency)) +
         hw_.kernel_overhead_us * 1e3;
}

double RooflineCostModel::elementwise_ns(double n) const {
  // Norms, RoPE and the residual: elementwise passes over the activations.
  const double H = config_.hidden_size;
  return stream_ns(4 * n * H * kBytes) + 2 * hw_.kernel_overhead_us * 1e3;
}

void RooflineCostModel::tabulate_rows(std::int64_t max_rows) {
  const ModelConfig& c = config_;
  const double H = c.hidden_size;
  rows_.assign(static_cast<std::size_t>(std::max<std::int64_t>(0, max_rows) + 1), RowTerms{});
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const double n = static_cast<double>(i);
    RowTerms& r = rows_[i];
    r.projections = projections_ns(n);
    r.elementwise = elementwise_ns(n);
    r.router = gemm_ns(H * c.num_experts, n);
    r.dense_mlp = gemm_ns(3 * H * c.intermediate_size, n);
    r.shared = c.has_shared_expert() ? gemm_ns(3 * H * c.shared_expert_intermediate_size + H, n) : 0;
    r.expert = expert_ns(n);
    r.sample = gemm_ns(H * c.vocab_size, n) + stream_ns(n * c.vocab_size * 4) + 2 * hw_.kernel_overhead_us * 1e3;
  }
}

std::int64_t RooflineCostModel::attention_ns(std::int32_t block, std::int64_t tokens, std::int64_t context) const {
  const ModelConfig& c = config_;
  const double ctx = static_cast<double>(context);
  if (tokens >= 0 && static_cast<std::size_t>(tokens) < rows_.size()) {
    // The tabulated terms, added in the order below (a shared expert's 0 adds nothing).
    const RowTerms& r = rows_[static_cast<std::size_t>(tokens)];
    double t = r.projections;
    t += context_ns(ctx);
    t += r.elementwise;
    if (c.is_sparse(block)) {
      t += r.router;
      t += r.shared;
    } else {
      t += r.dense_mlp;
    }
    return static_cast<std::int64_t>(std::ceil(t));
  }
  const double H = c.hidden_size, n = static_cast<double>(tokens);
  double t = projections_ns(n);
  t += context_ns(ctx);
  t += elementwise_ns(n);
  if (c.is_sparse(block)) {
    t += gemm_ns(H * c.num_experts, n);  // router
    t += shared_ns(block, n);
  } else {
    t += gemm_ns(3 * H * c.intermediate_size, n);  // dense MLP of this block
  }
  return static_cast<std::int64_t>(std::ceil(t));
}

double RooflineCostModel::shared_ns(std::int32_t block, double tokens) const {
  const ModelConfig& c = config_;
  if (!c.is_sparse(block) || !c.has_shared_expert()) return 0;
  // Gate, up and down projections and the sigmoid gate's one column.
  const double H = c.hidden_size;
  return gemm_ns(3 * H * c.shared_expert_intermediate_size + H, tokens);
}

std::int64_t RooflineCostModel::shared_expert_ns(std::int32_t block, std::int64_t tokens) const {
  return static_cast<std::int64_t>(std::ceil(shared_ns(block, static_cast<double>(tokens))));
}

double RooflineCostModel::expert_ns(double rows) const {
  // Gate/up as one GEMM, SiLU·mul, down: per expert, as a grouped GEMM runs them.
  const double H = config_.hidden_size;
  const double I = config_.moe_intermediate_size;
  return gemm_ns(2 * H * I, rows) + gemm_ns(H * I, rows) + stream_ns(3 * rows * I * kBytes);
}

std::int64_t RooflineCostModel::experts_ns(std::int32_t, std::span<const std::int64_t> tokens_per_expert) const {
  double t = 0;
  for (std::int64_t n : tokens_per_expert) {
    if (n <= 0) continue;
    t += static_cast<std::size_t>(n) < rows_.size() ? rows_[static_cast<std::size_t>(n)].expert
                                                     : expert_ns(static_cast<double>(n));
  }
  return static_cast<std::int64_t>(std::ceil(t));
}

std::int64_t RooflineCostModel::sample_ns(std::int64_t tokens) const {
  if (tokens >= 0 && static_cast<std::size_t>(tokens) < rows_.size())
    return static_cast<std::int64_t>(std::ceil(rows_[static_cast<std::size_t>(tokens)].sample));
  const double n = static_cast<double>(tokens);
  const double H = config_.hidden_size, V = config_.vocab_size;
  // Final norm, lm_head, softmax/argmax over the vocabulary.
  const double t = gemm_ns(H * V, n) + stream_ns(n * V * 4) + 2 * hw_.kernel_overhead_us * 1e3;
  return static_cast<std::int64_t>(std::ceil(t));
}

}  // namespace sy
