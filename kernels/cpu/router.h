// MoE router: softmax over expert logits, top-k selection, optional renormalisation.
#pragma once

#include <cstdint>

namespace sy::kernels {

// For each of n_tokens rows of logits [n_tokens, n_experts]: probabilities = softmax(logits)
// in float32, then the k largest (descending; ties to the lower expert id, like a stable
// sort), and when `renormalize` the k weights are divided by their sum (Mixtral always;
// Qwen MoE when norm_topk_prob). Writes expert_ids and weights, both [n_tokens, k].
void router_topk(const float* logits, std::int64_t n_tokens, std::int32_t n_experts, std::int32_t k,
                 bool renormalize, std::int32_t* expert_ids, float* weights);

}  // namespace sy::kernels
