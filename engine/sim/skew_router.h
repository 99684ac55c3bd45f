// A synthetic router that replaces the model's: expert popularity decays exponentially with a
// per-block random rank (AMoE's fit of real traffic), so schedulers and placements can be
// studied under controlled skew, independently of what the weights would route.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/runtime/token_batch.h"

namespace sy {

class SkewRouter {
 public:
  // In each block the experts get a random order (rank 0 = hottest) drawn from `seed`, and
  // popularity ∝ exp(−lambda · rank): lambda = 0 is uniform, larger is more skewed.
  // Requires num_layers >= 0, num_experts >= 1 and a finite lambda >= 0 (asserted).
  SkewRouter(std::int32_t num_layers, std::int32_t num_experts, double lambda, std::uint64_t seed);

  // Picks k distinct experts for one token, by sampling without replacement proportionally to
  // popularity (the first pick is distributed exactly as popularity). Weights are the picked
  // experts' popularities renormalised to sum to 1; each is floored at 1e-6 of the largest
  // before renormalising, so that no picked expert gets a zero weight when exp() underflows.
  // A pure function of (seed, block, token_key): any device, batch or call order routes the
  // same token the same way, and a run replays exactly. Requires 1 <= k <= num_experts.
  void route(std::int32_t block, std::uint64_t token_key, std::int32_t k, std::int32_t* expert_ids,
             float* weights) const;
  // route() for `rows` tokens of one block at once, token i keyed skew_token_key(row[i].request,
  // row[i].position), its k picks at expert_ids[i·k] and weights[i·k]: the same picks and
  // weights as one route() per token, for one call per execution instead of one per row.
  void route_rows(std::int32_t block, const TokenRow* row, std::int64_t rows, std::int32_t k, std::int32_t* expert_ids,
                  float* weights) const;

  // Per expert id, the probability that it is the first pick in `block`; sums to 1.
  const std::vector<double>& popularity(std::int32_t block) const { return popularity_[static_cast<std::size_t>(block)]; }
  // Rank -> expert id in `block`, hottest first.
  const std::vector<std::int32_t>& ranking(std::int32_t block) const { return ranking_[static_cast<std::size_t>(block)]; }

  std::int32_t num_layers() const { return static_cast<std::int32_t>(ranking_.size()); }
  std::int32_t num_experts() const { return num_experts_; }
  double lambda() const { return lambda_; }

 private:
  // One column of Vose's alias table: a draw whose low 32 bits are below `threshold` keeps the
  // column, otherwise takes `alias`. threshold = ceil(prob · 2^32), so the integer comparison
  // decides exactly as u < prob with u = low32 · 2^-32 (both sides exact in a double).
  struct AliasColumn {
    std::uint64_t threshold;
    std::int32_t alias;
  };
  // The hash every token of `block` starts from (route's state is it mixed with the token key).
  std::uint64_t block_hash(std::int32_t block) const;
  // route() from a token's starting state: top-2 apart, any other k through route_any.
  void route_from(std::uint64_t state, std::int32_t block, std::int32_t k, std::int32_t* expert_ids,
                  float* weights) const;
  void route_two(std::uint64_t state, const std::int32_t* order, std::int32_t* expert_ids, float* weights) const;
  // route_rows for k other than 2, from the block's hash.
  void route_rows_any(std::uint64_t hash, std::int32_t block, const TokenRow* row, std::int64_t rows, std::int32_t k,
                      std::int32_t* expert_ids, float* weights) const;
  // taken_ranks: a zero byte per rank, left zero.
  void route_any(std::uint64_t state, std::int32_t block, std::int32_t k, std::int32_t* expert_ids,
                 float* weights, std::uint8_t* taken_ranks) const;
  // route_any's table of taken ranks, zeroed once per call of route_rows: on the stack up to
  // 1024 experts.
  class TakenRanks {
   public:
    explicit TakenRanks(std::int32_t experts) {
      const auto n = static_cast<std::size_t>(experts);
      if (n > sizeof(stack_)) {
        heap_.assign(n, 0);
        data_ = heap_.data();
      } else {
        std::fill(stack_, stack_ + n, std::uint8_t{0});
      }
    }
    std::uint8_t* data() { return data_; }

   private:
    std::uint8_t stack_[1024];
    std::vector<std::uint8_t> heap_;
    std::uint8_t* data_ = stack_;
  };
  // A rank from the full distribution (one random number).
  std::int32_t draw(std::uint64_t& state) const;
  // Whether a drawn rank may be picked: it has weight and `taken(rank)` is false.
  template <class Taken>
  std::int32_t pick_rank(std::uint64_t& state, Taken taken) const;
  // After 64 rejected draws: the exact scan over the untaken ranks (rare: almost all weight taken).
  template <class Taken>
  std::int32_t pick_by_scan(std::uint64_t& state, Taken taken) const;

  std::int32_t num_experts_;
  double lambda_;
  std::uint64_t seed_hash_;
  std::vector<double> rank_weight_;                 // [rank], sums to 1
  double first_pick_total_ = 0;                     // Σ rank_weight_, in rank order
  std::vector<double> relative_weight_;             // [rank distance] -> max(exp(-λ·d), 1e-6)
  // A top-2 token's two weights, by the distance d of its ranks: {1, w}/(1 + w), w =
  // relative_weight_[d], each the float route_any computes (the hotter pick's relative weight
  // is exactly 1, and 1 + w = w + 1 whichever was picked first): no division per token.
  struct PairWeights {
    float hotter, colder;
  };
  std::vector<PairWeights> pair_weight_;
  std::vector<AliasColumn> alias_table_;            // Vose alias table over rank_weight_
  // Every rank has a positive weight (no exp() underflow): a drawn rank needs no weight check.
  bool all_positive_ = true;
  std::vector<std::vector<std::int32_t>> ranking_;  // [block][rank] -> expert
  std::vector<std::vector<std::int32_t>> rank_of_;  // [block][expert] -> rank
  std::vector<std::vector<double>> popularity_;     // [block][expert]
};

// The skew model a deployment routes with, replaceable while it serves (the demo's
// set_workload): every executor of the deployment shares one. Loop thread only.
class SkewRouting {
 public:
  SkewRouting(std::int32_t num_layers, std::int32_t num_experts, double lambda, std::uint64_t seed)
      : layers_(num_layers), experts_(num_experts), seed_(seed),
        router_(std::make_unique<SkewRouter>(num_layers, num_experts, lambda, seed)) {}
  // Routes one token (request, position) of `block`, as SkewRouter::route does.
  void route(std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t k, std::int32_t* expert_ids,
             float* weights) const;
  // Routes `rows` tokens of `block`, as SkewRouter::route_rows does.
  void route_rows(std::int32_t block, const TokenRow* row, std::int64_t rows, std::int32_t k, std::int32_t* expert_ids,
                  float* weights) const {
    router_->route_rows(block, row, rows, k, expert_ids, weights);
  }
  // From now on popularity ∝ exp(−lambda·rank), with the same per-block expert order.
  void set_lambda(double lambda) { router_ = std::make_unique<SkewRouter>(layers_, experts_, lambda, seed_); }
  double lambda() const { return router_->lambda(); }
  const SkewRouter& router() const { return *router_; }

 private:
  std::int32_t layers_, experts_;
  std::uint64_t seed_;
  std::unique_ptr<SkewRouter> router_;
};

// The token_key the runtime passes for one token: its request and absolute position, so that a
// replayed or re-batched token keeps its key.
std::uint64_t skew_token_key(std::int64_t request_id, std::int32_t position);

// "exp:<lambda>" with lambda >= 0 ("exp:0" is uniform routing, "exp:0.5" AMoE-like skew). The
// message names the text it could not read.
StatusOr<double> parse_skew(const std::string& text);

}  // namespace sy
