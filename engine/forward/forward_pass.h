// One forward step of the whole model over a batch on one device: the reference composition
// of ModelOps (embed, then attention and FFN per block, then the final norm and lm_head).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/forward/batch_layout.h"
#include "engine/forward/model_ops.h"
#include "engine/kv/paged_kv_cache.h"

namespace sy {

// Runs tokens[batch.n_tokens()] through every block, writing their keys and values into the
// cache, and writes logits [logit_rows.size(), vocab] of the requested batch rows.
void forward_pass(const ModelOps& ops, const BatchLayout& batch, PagedKvCache& cache,
                  const std::int32_t* tokens, const std::vector<std::int32_t>& logit_rows,
                  float* logits, Workspace& ws, std::vector<float>& hidden);

}  // namespace sy
