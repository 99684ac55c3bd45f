// A tiny model and round-number device profiles whose roofline can be worked by hand: peak
// efficiency at every batch, no kernel overhead, 1 TFLOP/s, 1 GB/s of HBM (1 byte/ns), 1 GB/s
// NICs with 1 µs latency.
#pragma once

#include "engine/plan/plan_model.h"

namespace sy::test {

inline ModelConfig tiny_model() {
  ModelConfig c;
  c.arch = Arch::Mixtral;
  c.vocab_size = 100;
  c.hidden_size = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 1;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.moe_intermediate_size = 128;
  c.num_experts = 4;
  c.top_k = 2;
  c.sparse_layers = {true, true};
  return c;
}

inline HardwareProfile round_profile(const char* name, double price, double memory_bytes) {
  HardwareProfile h;
  h.name = name;
  h.bf16_tflops = 1;
  h.hbm_gbps = 1;
  h.memory_gib = memory_bytes / 1073741824.0;
  h.nic_gbps = 1;
  h.nic_latency_us = 1;
  h.price = price;
  h.gemm_efficiency = 1;
  h.gemm_half_tokens = 0;
  h.hbm_efficiency = 1;
  h.kernel_overhead_us = 0;
  return h;
}

// Attention GPUs: 100 000 bytes, price 2; expert GPUs: 10^6 bytes, price 3. All of it usable.
inline PlanInputs tiny_inputs() {
  PlanInputs in;
  in.config = tiny_model();
  in.attention_hw = round_profile("A", 2, 100000);
  in.expert_hw = round_profile("E", 3, 1000000);
  in.seq_len = 10;
  in.kv_len = 20;
  in.memory_fraction = 1;
  in.devices_per_node = 4;
  in.max_microbatches = 4;
  in.max_devices = 8;
  in.max_batch_per_microbatch = 64;
  return in;
}

}  // namespace sy::test
