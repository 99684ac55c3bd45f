// The per-block operations of a MoE transformer over a batch of tokens. The reference path
// composes them in order; the expert-parallel runtime runs the same pieces on different
// workers (attention on attention ranks, experts on expert devices), so both compute alike.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/forward/batch_layout.h"
#include "engine/kv/paged_kv_cache.h"
#include "engine/model/model_weights.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/swiglu.h"

namespace sy {

// Reusable buffers so that steady-state steps do not allocate. One per executing worker.
struct Workspace {
  std::vector<float> normed, q, k, v, attn, router_logits, gather, expert_y, expert_out, shared_gate;
  std::vector<std::int32_t> expert_ids, expert_rows;
  std::vector<float> expert_weights, row_scale;
  std::vector<float> rounded;  // a linear's input under GemmInputs::WeightType
  kernels::SwigluScratch swiglu;
};

class ModelOps {
 public:
  // inputs: Float32 for the cpu backend; WeightType computes as the cuda backend does with
  // 16-bit weights (every GEMM input rounded to the weight's type), to compare against it.
  explicit ModelOps(std::shared_ptr<const ModelWeights> weights,
                    kernels::GemmInputs inputs = kernels::GemmInputs::Float32);

  const ModelConfig& config() const { return weights_->config(); }
  const ModelWeights& weights() const { return *weights_; }
  kernels::GemmInputs gemm_inputs() const { return inputs_; }

  // hidden[n, H] = embed_tokens[tokens].
  void embed(const std::int32_t* tokens, std::int64_t n, float* hidden) const;

  // The attention half of block `layer`: hidden += o_proj(attention(input_norm(hidden))).
  // Writes the batch's keys and values into the cache at the batch's positions.
  void attention(std::int32_t layer, const BatchLayout& batch, PagedKvCache& cache, float* hidden,
                 Workspace& ws) const;

  // ffn_in[n, H] = post_attention_norm(hidden): what the MLP or the experts consume.
  void ffn_input(std::int32_t layer, const float* hidden, std::int64_t n, float* ffn_in) const;

  // Router of a sparse block: top-k expert ids and weights [n, k] of each token.
  void route(std::int32_t layer, const float* ffn_in, std::int64_t n, std::int32_t* expert_ids,
             float* expert_weights, Workspace& ws) const;

  // out[m, H] = row_scale[r] · expert_e(x[r]) for m gathered rows of one expert.
  void expert(std::int32_t layer, std::int32_t e, const float* x, std::int64_t m,
              const float* row_scale, float* out, Workspace& ws) const;

  // The same with the expert's weights given: a device's own copy of them (the runtime's cpu
  // devices each hold the experts they host).
  void expert(const FfnWeights& w, const float* x, std::int64_t m, const float* row_scale, float* out,
              Workspace& ws) const;

  // out[n, H] = sigmoid(shared_expert_gate(x)) · shared_expert(x) (qwen2_moe).
  void shared_expert(std::int32_t layer, const float* x, std::int64_t n, float* out,
                     Workspace& ws) const;

  // out[n, H] = mlp(x) for a dense (non-MoE) block.
  void dense_mlp(std::int32_t layer, const float* x, std::int64_t n, float* out, Workspace& ws) const;

  // The whole FFN half of a block on one device: hidden += ffn(ffn_input(hidden)), with the
  // routed experts grouped so each runs once over all of its tokens.
  void ffn(std::int32_t layer, float* hidden, std::int64_t n, Workspace& ws) const;

  // hidden[n, H] += Σ_k slot_out[t·K + k] (+ shared[t]) for every token t: the K weighted expert
  // outputs summed in rank order, then the shared expert's. Used by ffn() and by the runtime's
  // token pool, so both add in the same order.
  static void combine(const float* slot_out, const float* shared, std::int64_t n, std::int32_t K,
                      std::int64_t H, float* hidden);

  // logits[rows.size(), V] = lm_head(final_norm(hidden[rows])).
  void logits(const float* hidden, const std::vector<std::int32_t>& rows, float* out,
              Workspace& ws) const;

 private:
  // kernels::linear of x under inputs_.
  void linear(const float* x, std::int64_t n, const kernels::WeightView& w, const float* bias, float* y,
              Workspace& ws, bool accumulate = false) const;
  void run_ffn(const FfnWeights& w, const float* x, std::int64_t n, const float* row_scale, float* y,
               Workspace& ws) const;

  std::shared_ptr<const ModelWeights> weights_;
  kernels::Rope rope_;
  kernels::GemmInputs inputs_;
};

}  // namespace sy
