#include "engine/forward/model_ops.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/router.h"

namespace sy {
namespace {

template <class T>
T* sized(std::vector<T>& buffer, std::int64_t n) {
  if (static_cast<std::int64_t>(buffer.size()) < n) buffer.resize(static_cast<std::size_t>(n));
  return buffer.data();
}

void rmsnorm(const float* x, const VectorView& w, float eps, std::int64_t rows, std::int64_t dim, float* y) {
  kernels::rmsnorm(x, w.data, w.dtype, eps, rows, dim, y);
}

}  // namespace

ModelOps::ModelOps(std::shared_ptr<const ModelWeights> weights, kernels::GemmInputs inputs)
    : weights_(std::move(weights)), rope_(weights_->config().rope()), inputs_(inputs) {}

void ModelOps::linear(const float* x, std::int64_t n, const kernels::WeightView& w, const float* bias, float* y,
                      Workspace& ws, bool accumulate) const {
  kernels::linear(kernels::gemm_input(x, n * w.cols, w.dtype, inputs_, ws.rounded), n, w, bias, y, accumulate);
}

// y[n, H] = down(silu(gate·x) ⊙ up·x), optionally scaled per row.
void ModelOps::run_ffn(const FfnWeights& w, const float* x, std::int64_t n, const float* row_scale, float* y,
                       Workspace& ws) const {
  kernels::swiglu_ffn(x, n, w.gate, w.up, w.down, y, ws.swiglu, row_scale, /*accumulate=*/false, inputs_);
}

void ModelOps::embed(const std::int32_t* tokens, std::int64_t n, float* hidden) const {
  const auto& table = weights_->embed_tokens();
  for (std::int64_t i = 0; i < n; ++i) {
    assert(tokens[i] >= 0 && tokens[i] < table.rows);
    kernels::convert_to_f32(table.row(tokens[i]), table.dtype, hidden + i * table.cols,
                            static_cast<std::size_t>(table.cols));
  }
}

void ModelOps::attention(std::int32_t layer, const BatchLayout& batch, PagedKvCache& cache,
                         float* hidden, Workspace& ws) const {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layer(layer);
  const std::int64_t n = batch.n_tokens();
  const std::int64_t q_width = static_cast<std::int64_t>(c.num_heads) * c.head_dim;
  const std::int64_t kv_width = static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim;

  float* normed = sized(ws.normed, n * c.hidden_size);
  float* q = sized(ws.q, n * q_width);
  float* k = sized(ws.k, n * kv_width);
  float* v = sized(ws.v, n * kv_width);
  float* attn = sized(ws.attn, n * q_width);

  rmsnorm(hidden, w.input_norm, c.rms_norm_eps, n, c.hidden_size, normed);
  linear(normed, n, w.q_proj, w.q_bias, q, ws);
  linear(normed, n, w.k_proj, w.k_bias, k, ws);
  linear(normed, n, w.v_proj, w.v_bias, v, ws);
  if (c.qk_norm) {
    // Qwen3 normalises each head before the rotation, so RoPE sees unit-scale vectors; OLMoE
    // normalises each row's whole projection (all heads at once).
    const std::int32_t q_rows = c.qk_norm_per_head ? c.num_heads : 1, kv_rows = c.qk_norm_per_head ? c.num_kv_heads : 1;
    rmsnorm(q, w.q_norm, c.rms_norm_eps, n * q_rows, q_width / q_rows, q);
    rmsnorm(k, w.k_norm, c.rms_norm_eps, n * kv_rows, kv_width / kv_rows, k);
  }
  rope_.apply(q, n, c.num_heads, batch.positions.data());
  rope_.apply(k, n, c.num_kv_heads, batch.positions.data());

  const kernels::KvLayerView view = cache.layer(layer);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  for (const BatchLayout::Sequence& s : batch.sequences) {
    kernels::kv_cache_write(view, s.block_table, s.start_pos, s.n_tokens, k + s.first_token * kv_width,
                            v + s.first_token * kv_width);
    kernels::paged_attention(q + s.first_token * q_width, s.n_tokens, c.num_heads,
                             batch.positions.data() + s.first_token, view, s.block_table, scale,
                             attn + s.first_token * q_width);
  }
  linear(attn, n, w.o_proj, nullptr, hidden, ws, /*accumulate=*/true);
}

void ModelOps::ffn_input(std::int32_t layer, const float* hidden, std::int64_t n, float* ffn_in) const {
  const ModelConfig& c = config();
  rmsnorm(hidden, weights_->layer(layer).post_attention_norm, c.rms_norm_eps, n, c.hidden_size, ffn_in);
}

void ModelOps::route(std::int32_t layer, const float* ffn_in, std::int64_t n, std::int32_t* expert_ids,
                     float* expert_weights, Workspace& ws) const {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layer(layer);
  assert(w.sparse);
  float* logits = sized(ws.router_logits, n * c.num_experts);
  linear(ffn_in, n, w.router, nullptr, logits, ws);
  kernels::router_topk(logits, n, c.num_experts, c.top_k, c.norm_topk_prob, expert_ids, expert_weights);
}

void ModelOps::expert(std::int32_t layer, std::int32_t e, const float* x, std::int64_t m,
                      const float* row_scale, float* out, Workspace& ws) const {
  run_ffn(weights_->layer(layer).experts[e], x, m, row_scale, out, ws);
}

void ModelOps::expert(const FfnWeights& w, const float* x, std::int64_t m, const float* row_scale, float* out,
                      Workspace& ws) const {
  run_ffn(w, x, m, row_scale, out, ws);
}

void ModelOps::shared_expert(std::int32_t layer, const float* x, std::int64_t n, float* out,
                             Workspace& ws) const {
  const LayerWeights& w = weights_->layer(layer);
  assert(!w.shared_expert.empty());
  float* gate = sized(ws.shared_gate, n);
  linear(x, n, w.shared_expert_gate, nullptr, gate, ws);
  for (std::int64_t i = 0; i < n; ++i) gate[i] = 1.0f / (1.0f + std::exp(-gate[i]));
  run_ffn(w.shared_expert, x, n, gate, out, ws);
}

void ModelOps::dense_mlp(std::int32_t layer, const float* x, std::int64_t n, float* out,
                         Workspace& ws) const {
  run_ffn(weights_->layer(layer).dense_mlp, x, n, nullptr, out, ws);
}

void ModelOps::ffn(std::int32_t layer, float* hidden, std::int64_t n, Workspace& ws) const {
  const ModelConfig& c = config();
  const LayerWeights& w = weights_->layer(layer);
  const std::int64_t H = c.hidden_size;
  float* x = sized(ws.normed, n * H);
  ffn_input(layer, hidden, n, x);

  if (!w.sparse) {
    float* out = sized(ws.expert_out, n * H);
    dense_mlp(layer, x, n, out, ws);
    for (std::int64_t i = 0; i < n * H; ++i) hidden[i] += out[i];
    return;
  }

  const std::int32_t K = c.top_k;
  std::int32_t* ids = sized(ws.expert_ids, n * K);
  float* weights = sized(ws.expert_weights, n * K);
  route(layer, x, n, ids, weights, ws);

  // One output slot per (token, rank): the slots are summed in rank order below, the same
  // order the runtime's token pool uses, so results do not depend on which expert finished first.
  const std::int64_t slots = n * K;
  float* slot_out = sized(ws.expert_out, (slots + n) * H);
  float* gathered = sized(ws.gather, slots * H);
  std::int32_t* rows = sized(ws.expert_rows, slots);
  float* scale = sized(ws.row_scale, slots);
  for (std::int32_t e = 0; e < c.num_experts; ++e) {
    std::int64_t m = 0;
    for (std::int64_t s = 0; s < slots; ++s) {
      if (ids[s] != e) continue;
      rows[m] = static_cast<std::int32_t>(s);
      scale[m] = weights[s];
      std::copy_n(x + (s / K) * H, H, gathered + m * H);
      ++m;
    }
    if (m == 0) continue;
    float* y = sized(ws.expert_y, m * H);
    expert(layer, e, gathered, m, scale, y, ws);
    for (std::int64_t r = 0; r < m; ++r) std::copy_n(y + r * H, H, slot_out + rows[r] * H);
  }

  float* shared = nullptr;
  if (!w.shared_expert.empty()) {
    shared = slot_out + slots * H;
    shared_expert(layer, x, n, shared, ws);
  }
  combine(slot_out, shared, n, K, H, hidden);
}

void ModelOps::combine(const float* slot_out, const float* shared, std::int64_t n, std::int32_t K,
                       std::int64_t H, float* hidden) {
  for (std::int64_t t = 0; t < n; ++t) {
    float* h = hidden + t * H;
    const float* first = slot_out + (t * K) * H;
    for (std::int64_t i = 0; i < H; ++i) {
      float acc = first[i];
      for (std::int32_t r = 1; r < K; ++r) acc += slot_out[(t * K + r) * H + i];
      if (shared) acc += shared[t * H + i];
      h[i] += acc;
    }
  }
}

void ModelOps::logits(const float* hidden, const std::vector<std::int32_t>& rows, float* out,
                      Workspace& ws) const {
  const ModelConfig& c = config();
  const std::int64_t H = c.hidden_size;
  const std::int64_t m = static_cast<std::int64_t>(rows.size());
  float* x = sized(ws.normed, m * H);
  for (std::int64_t r = 0; r < m; ++r) std::copy_n(hidden + rows[r] * H, H, x + r * H);
  rmsnorm(x, weights_->final_norm(), c.rms_norm_eps, m, H, x);
  linear(x, m, weights_->lm_head(), nullptr, out, ws);
}

}  // namespace sy
