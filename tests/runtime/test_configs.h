// Hand-made model configs for the layout and placement tests (no model files needed).
#pragma once

#include "engine/model/model_config.h"

namespace sy::testing {

// Mixtral-like: 4 blocks, all sparse, 8 experts, top-2.
inline ModelConfig mixtral_like() {
  ModelConfig c;
  c.arch = Arch::Mixtral;
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.moe_intermediate_size = 128;
  c.num_experts = 8;
  c.top_k = 2;
  c.sparse_layers.assign(4, true);
  return c;
}

// Qwen3-MoE-like with dense blocks: 6 blocks of which 0 and 2 are dense, 16 experts, top-4.
inline ModelConfig qwen3_like() {
  ModelConfig c;
  c.arch = Arch::Qwen3Moe;
  c.vocab_size = 1000;
  c.hidden_size = 64;
  c.num_layers = 6;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 16;
  c.intermediate_size = 128;
  c.moe_intermediate_size = 32;
  c.num_experts = 16;
  c.top_k = 4;
  c.qk_norm = true;
  c.sparse_layers = {false, true, false, true, true, true};
  return c;
}

}  // namespace sy::testing
