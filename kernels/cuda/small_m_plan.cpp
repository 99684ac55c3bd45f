#include "kernels/cuda/small_m_plan.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace sy::kernels {
namespace {

// The largest feature tile that still gives every multiprocessor two CTAs: larger tiles load
// each piece's x into shared memory fewer times, smaller ones fill the GPU at batch 1.
// ctas(rows): the grid's CTAs at that tile.
template <class Ctas>
int tile_rows(const Ctas& ctas, int sm_count) {
  const std::int64_t want = 2 * static_cast<std::int64_t>(std::max(1, sm_count));
  for (const int rows : {4 * kSmallMTileQuantum, 2 * kSmallMTileQuantum})
    if (ctas(rows) >= want) return rows;
  return kSmallMTileQuantum;
}

}  // namespace

SmallMPlan plan_small_m(const SmallMRequest& r) {
  SmallMPlan plan;
  auto no = [&plan](const char* why) {
    plan.why_not = why;
    plan.pieces.clear();
    return plan;
  };
  if (!r.enabled) return no("disabled (SY_CUDA_SMALL_M=0 or the workspace's small_m = false)");
  if (r.N <= 0 || r.K <= 0 || r.N > INT_MAX || r.K > INT_MAX) return no("N or K out of range");
  std::int64_t max_piece = 0;
  for (std::size_t i = 0; i < r.ms.size(); ++i) {
    const std::int64_t m = r.ms[i];
    if (m < 0) return no("negative m");
    if (m > kSmallMMaxRows) return no("a problem has more rows than kSmallMMaxRows");
    for (std::int64_t row0 = 0; row0 < m; row0 += kSmallMPieceRows) {
      const std::int64_t rows = std::min(kSmallMPieceRows, m - row0);
      plan.pieces.push_back({static_cast<std::int64_t>(i), row0, rows});
      max_piece = std::max(max_piece, rows);
    }
  }
  if (plan.pieces.empty()) return no("no problem has rows");
  if (r.K % small_m_vector_elems(r.type) != 0) return no("K is not a multiple of one 16-byte weight load");
  if (!r.weights_aligned) return no("a weight is not 16-byte aligned");
  plan.smem_bytes = static_cast<std::size_t>(max_piece * r.K) * sizeof(float);
  if (plan.smem_bytes > r.smem_limit) return no("the rows of x do not fit in shared memory");
  plan.smem_limit = r.smem_limit;
  plan.m_tile = 1;
  while (plan.m_tile < max_piece) plan.m_tile *= 2;
  const auto pieces = static_cast<std::int64_t>(plan.pieces.size());
  plan.rows_per_cta = tile_rows([&](int rows) { return pieces * ((r.N + rows - 1) / rows); }, r.sm_count);
  if (r.N < plan.rows_per_cta)
    plan.rows_per_cta = static_cast<int>((r.N + kSmallMTileQuantum - 1) / kSmallMTileQuantum * kSmallMTileQuantum);
  plan.tiles_per_piece = (r.N + plan.rows_per_cta - 1) / plan.rows_per_cta;
  plan.blocks = pieces * plan.tiles_per_piece;
  if (plan.blocks > INT_MAX) return no("more CTAs than one grid holds");
  plan.use = true;
  return plan;
}

DenseSmallMPlan plan_dense_small_m(const DenseSmallMRequest& r) {
  DenseSmallMPlan plan;
  auto no = [&plan](std::string why) {
    plan.why_not = std::move(why);
    plan.tiles_begin.clear();
    return plan;
  };
  if (r.m < 1 || r.m > kSmallMPieceRows) return no("m is not within 1..kSmallMPieceRows");
  if (r.Ns.empty() || r.Ns.size() > static_cast<std::size_t>(kDenseSmallMMaxOutputs))
    return no("not 1..kDenseSmallMMaxOutputs outputs");
  // The grouped plan checks everything else (K, alignment, shared memory, the switch) on the
  // widest output; the same tile rule then runs over every output's tiles.
  SmallMRequest one;
  one.ms = {r.m};
  one.N = *std::max_element(r.Ns.begin(), r.Ns.end());
  one.K = r.K;
  one.type = r.type;
  one.weights_aligned = r.weights_aligned;
  one.smem_limit = r.smem_limit;
  one.sm_count = r.sm_count;
  one.enabled = r.enabled;
  for (const std::int64_t N : r.Ns)
    if (N <= 0 || N > INT_MAX) return no("N or K out of range");
  const SmallMPlan grouped = plan_small_m(one);
  if (!grouped.use) return no(grouped.why_not);
  plan.m_tile = grouped.m_tile;
  plan.smem_bytes = grouped.smem_bytes;
  plan.smem_limit = grouped.smem_limit;
  plan.rows_per_cta = tile_rows(
      [&r](int rows) {
        std::int64_t t = 0;
        for (const std::int64_t N : r.Ns) t += (N + rows - 1) / rows;
        return t;
      },
      r.sm_count);
  plan.tiles_begin.push_back(0);
  for (const std::int64_t N : r.Ns) plan.tiles_begin.push_back(plan.tiles_begin.back() + (N + plan.rows_per_cta - 1) / plan.rows_per_cta);
  plan.blocks = plan.tiles_begin.back();
  if (plan.blocks > INT_MAX) return no("more CTAs than one grid holds");
  plan.use = true;
  return plan;
}

bool dense_small_m_enabled_by_env() {
  const char* v = std::getenv("SY_CUDA_DENSE_SMALL_M");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

bool small_m_enabled_by_env() {
  const char* v = std::getenv("SY_CUDA_SMALL_M");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

}  // namespace sy::kernels
