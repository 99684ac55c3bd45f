#include "engine/forward/forward_pass.h"

namespace sy {

void forward_pass(const ModelOps& ops, const BatchLayout& batch, PagedKvCache& cache,
                  const std::int32_t* tokens, const std::vector<std::int32_t>& logit_rows,
                  float* logits, Workspace& ws, std::vector<float>& hidden) {
  const ModelConfig& c = ops.config();
  const std::int64_t n = batch.n_tokens();
  hidden.resize(static_cast<std::size_t>(n * c.hidden_size));
  ops.embed(tokens, n, hidden.data());
  for (std::int32_t layer = 0; layer < c.num_layers; ++layer) {
    ops.attention(layer, batch, cache, hidden.data(), ws);
    ops.ffn(layer, hidden.data(), n, ws);
  }
  if (!logit_rows.empty()) ops.logits(hidden.data(), logit_rows, logits, ws);
}

}  // namespace sy
