#include "engine/sim/skew_router.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>

namespace sy {
namespace {

// splitmix64's finaliser: a bijective 64-bit mix, so distinct inputs stay distinct.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// splitmix64 as a counter-based stream: the whole state is one local integer.
std::uint64_t next(std::uint64_t& state) { return mix(state += 0x9e3779b97f4a7c15ULL); }

double uniform01(std::uint64_t& state) { return static_cast<double>(next(state) >> 11) * 0x1.0p-53; }

std::uint64_t uniform_below(std::uint64_t& state, std::uint64_t n) {
  const std::uint64_t threshold = (std::uint64_t{0} - n) % n;
  std::uint64_t x = next(state);
  while (x < threshold) x = next(state);
  return x % n;
}

constexpr std::uint64_t kPermutationSalt = 0x7065726d75746521ULL;  // "permute!"
constexpr std::uint64_t kRouteSalt = 0x726f757465212121ULL;        // "route!!!"
constexpr double kMinRelativeWeight = 1e-6;

}  // namespace

SkewRouter::SkewRouter(std::int32_t num_layers, std::int32_t num_experts, double lambda, std::uint64_t seed)
    : num_experts_(num_experts), lambda_(lambda), seed_hash_(mix(seed ^ kRouteSalt)) {
  assert(num_layers >= 0 && num_experts >= 1 && std::isfinite(lambda) && lambda >= 0.0);
  const auto n = static_cast<std::size_t>(num_experts);
  rank_weight_.resize(n);
  // Normalising from the hottest rank down keeps the sum ≥ 1 before division: no 0/0 when
  // the cold tail underflows.
  double total = 0.0;
  for (std::size_t r = 0; r < n; ++r) total += rank_weight_[r] = std::exp(-lambda * static_cast<double>(r));
  for (double& w : rank_weight_) w /= total;
  // The sum every first pick draws against, accumulated in the same order as route() would.
  first_pick_total_ = 0.0;
  for (double w : rank_weight_) first_pick_total_ += w;
  relative_weight_.resize(n);
  for (std::size_t d = 0; d < n; ++d)
    relative_weight_[d] = std::max(std::exp(-lambda * static_cast<double>(d)), kMinRelativeWeight);
  pair_weight_.resize(n);
  for (std::size_t d = 1; d < n; ++d) {
    const double w = relative_weight_[d], sum = relative_weight_[0] + w;
    pair_weight_[d] = {static_cast<float>(relative_weight_[0] / sum), static_cast<float>(w / sum)};
  }
  // Vose's alias table over the rank weights: one draw costs one random number, whatever E.
  std::vector<double> alias_prob_(n, 0.0);
  std::vector<std::int32_t> alias_(n, 0);
  {
    std::vector<double> scaled(n);
    std::vector<std::int32_t> small, large;
    for (std::size_t r = 0; r < n; ++r) {
      scaled[r] = rank_weight_[r] * static_cast<double>(n) / first_pick_total_;
      (scaled[r] < 1.0 ? small : large).push_back(static_cast<std::int32_t>(r));
    }
    while (!small.empty() && !large.empty()) {
      const std::int32_t l = small.back(), g = large.back();
      small.pop_back();
      alias_prob_[static_cast<std::size_t>(l)] = scaled[static_cast<std::size_t>(l)];
      alias_[static_cast<std::size_t>(l)] = g;
      scaled[static_cast<std::size_t>(g)] -= 1.0 - scaled[static_cast<std::size_t>(l)];
      if (scaled[static_cast<std::size_t>(g)] < 1.0) {
        large.pop_back();
        small.push_back(g);
      }
    }
    for (std::int32_t r : large) alias_prob_[static_cast<std::size_t>(r)] = 1.0;
    for (std::int32_t r : small) alias_prob_[static_cast<std::size_t>(r)] = 1.0;  // rounding leftovers
    for (std::size_t r = 0; r < n; ++r)
      if (alias_prob_[r] >= 1.0) alias_[r] = static_cast<std::int32_t>(r);
  }
  alias_table_.resize(n);
  for (std::size_t r = 0; r < n; ++r)
    alias_table_[r] = {static_cast<std::uint64_t>(std::ceil(alias_prob_[r] * 0x1.0p32)), alias_[r]};
  all_positive_ = std::all_of(rank_weight_.begin(), rank_weight_.end(), [](double w) { return w > 0.0; });

  std::uint64_t state = mix(seed ^ kPermutationSalt);
  ranking_.resize(static_cast<std::size_t>(num_layers));
  rank_of_.resize(ranking_.size());
  popularity_.resize(ranking_.size());
  for (std::size_t b = 0; b < ranking_.size(); ++b) {
    auto& order = ranking_[b];
    order.resize(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::int32_t>(i);
    for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[uniform_below(state, i + 1)]);  // Fisher-Yates
    rank_of_[b].resize(n);
    popularity_[b].resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      rank_of_[b][static_cast<std::size_t>(order[r])] = static_cast<std::int32_t>(r);
      popularity_[b][static_cast<std::size_t>(order[r])] = rank_weight_[r];
    }
  }
}

std::uint64_t SkewRouter::block_hash(std::int32_t block) const {
  return mix(seed_hash_ ^ static_cast<std::uint64_t>(block));
}

void SkewRouter::route(std::int32_t block, std::uint64_t token_key, std::int32_t k, std::int32_t* expert_ids,
                       float* weights) const {
  assert(block >= 0 && block < num_layers() && k >= 1 && k <= num_experts_);
  route_from(mix(block_hash(block) ^ token_key), block, k, expert_ids, weights);
}

// Every path consumes the token's random stream exactly as one sampling loop does: per
// pick, up to 64 draws from the full distribution until an untaken rank with weight comes up
// (exactly proportional to the untaken weights), then, if none did, the exact scan. Only how
// "taken" is checked differs (a compare for top-2, a bit per rank otherwise), so the picks and
// weights are the same numbers whichever path runs.
[[gnu::always_inline]] inline std::int32_t SkewRouter::draw(std::uint64_t& state) const {
  // The top 32 bits pick a column, the low 32 the side of its alias.
  const std::uint64_t x = next(state);
  const auto column = static_cast<std::size_t>(((x >> 32) * static_cast<std::uint64_t>(num_experts_)) >> 32);
  const AliasColumn& c = alias_table_[column];
  return (x & 0xffffffffULL) < c.threshold ? static_cast<std::int32_t>(column) : c.alias;
}

template <class Taken>
[[gnu::always_inline]] inline std::int32_t SkewRouter::pick_rank(std::uint64_t& state, Taken taken) const {
  for (int attempt = 0; attempt < 64; ++attempt) {
    const std::int32_t r = draw(state);
    if (!taken(r) && (all_positive_ || rank_weight_[static_cast<std::size_t>(r)] > 0.0)) return r;
  }
  return pick_by_scan(state, taken);
}

template <class Taken>
[[gnu::noinline]] std::int32_t SkewRouter::pick_by_scan(std::uint64_t& state, Taken taken) const {
  // Almost all of the weight is taken (or underflowed): the exact scan over what is left.
  std::int32_t pick = -1;
  double remaining = 0.0;
  for (std::int32_t r = 0; r < num_experts_; ++r)
    if (!taken(r)) remaining += rank_weight_[static_cast<std::size_t>(r)];
  if (remaining > 0.0) {
    double target = uniform01(state) * remaining;
    for (std::int32_t r = 0; r < num_experts_; ++r) {
      if (taken(r) || rank_weight_[static_cast<std::size_t>(r)] <= 0.0) continue;
      pick = r;  // rounding can leave target just above the last sum: take the last candidate
      target -= rank_weight_[static_cast<std::size_t>(r)];
      if (target < 0.0) break;
    }
  }
  if (pick < 0) {  // the untaken tail underflowed to zero weight: the hottest untaken rank
    pick = 0;
    while (taken(pick)) ++pick;
  }
  return pick;
}

[[gnu::always_inline]] inline void SkewRouter::route_two(std::uint64_t state, const std::int32_t* order, std::int32_t* expert_ids,
                                  float* weights) const {
  const std::int32_t first = pick_rank(state, [](std::int32_t) { return false; });
  const std::int32_t second = pick_rank(state, [first](std::int32_t r) { return r == first; });
  // Weights ∝ exp(−λ · (rank − hottest picked rank)), relative to the hottest pick so that they
  // stay representable however cold the tail is: route_any's numbers, from the table of pairs.
  const bool first_hotter = first < second;
  const PairWeights& pair = pair_weight_[static_cast<std::size_t>(first_hotter ? second - first : first - second)];
  weights[0] = first_hotter ? pair.hotter : pair.colder;
  weights[1] = first_hotter ? pair.colder : pair.hotter;
  expert_ids[0] = order[first];
  expert_ids[1] = order[second];
}

void SkewRouter::route_any(std::uint64_t state, std::int32_t block, std::int32_t k, std::int32_t* expert_ids,
                           float* weights, std::uint8_t* taken_ranks) const {
  // Ranks are kept in expert_ids until the end; the taken ranks are bytes, zero on entry and
  // zero again on return (the picks clear their own): a rejected draw is a byte compare, and
  // a token clears k bytes rather than the table. A wide k rejects many draws (about 6.6 per
  // pick for top-8 of 128 at exp:0.5), each of which tested a bit in a word.
  const auto taken = [taken_ranks](std::int32_t r) { return taken_ranks[static_cast<std::uint32_t>(r)] != 0; };
  for (std::int32_t j = 0; j < k; ++j) {
    const std::int32_t r = pick_rank(state, taken);
    expert_ids[j] = r;
    taken_ranks[static_cast<std::uint32_t>(r)] = 1;
  }
  std::int32_t hottest = expert_ids[0];
  taken_ranks[static_cast<std::uint32_t>(expert_ids[0])] = 0;
  for (std::int32_t j = 1; j < k; ++j) {
    hottest = std::min(hottest, expert_ids[j]);
    taken_ranks[static_cast<std::uint32_t>(expert_ids[j])] = 0;
  }
  double relative[64];
  std::vector<double> spill;
  double* rel = relative;
  if (k > 64) {
    spill.resize(static_cast<std::size_t>(k));
    rel = spill.data();
  }
  double sum = 0.0;
  for (std::int32_t j = 0; j < k; ++j) {
    rel[j] = relative_weight_[static_cast<std::size_t>(expert_ids[j] - hottest)];
    sum += rel[j];
  }
  const auto& order = ranking_[static_cast<std::size_t>(block)];
  for (std::int32_t j = 0; j < k; ++j) {
    weights[j] = static_cast<float>(rel[j] / sum);
    expert_ids[j] = order[static_cast<std::size_t>(expert_ids[j])];
  }
}

void SkewRouter::route_rows(std::int32_t block, const TokenRow* row, std::int64_t rows, std::int32_t k,
                            std::int32_t* expert_ids, float* weights) const {
  assert(block >= 0 && block < num_layers() && k >= 1 && k <= num_experts_);
  const std::uint64_t hash = block_hash(block);
  if (k == 2) {  // every model the demos and benches run: the block's constants hoisted out of the rows
    const std::int32_t* order = ranking_[static_cast<std::size_t>(block)].data();
    for (std::int64_t i = 0; i < rows; ++i)
      route_two(mix(hash ^ skew_token_key(row[i].request, row[i].position)), order, expert_ids + i * 2, weights + i * 2);
    return;
  }
  route_rows_any(hash, block, row, rows, k, expert_ids, weights);
}

// Out of line: the taken ranks' table on route_rows' own frame cost the top-2 loop above.
[[gnu::noinline]] void SkewRouter::route_rows_any(std::uint64_t hash, std::int32_t block, const TokenRow* row,
                                                  std::int64_t rows, std::int32_t k, std::int32_t* expert_ids,
                                                  float* weights) const {
  TakenRanks taken(num_experts_);
  for (std::int64_t i = 0; i < rows; ++i)
    route_any(mix(hash ^ skew_token_key(row[i].request, row[i].position)), block, k, expert_ids + i * k, weights + i * k,
              taken.data());
}

void SkewRouter::route_from(std::uint64_t state, std::int32_t block, std::int32_t k, std::int32_t* expert_ids,
                            float* weights) const {
  if (k == 2)
    route_two(state, ranking_[static_cast<std::size_t>(block)].data(), expert_ids, weights);
  else
    route_any(state, block, k, expert_ids, weights, TakenRanks(num_experts_).data());
}

void SkewRouting::route(std::int32_t block, std::int64_t request, std::int32_t position, std::int32_t k,
                        std::int32_t* expert_ids, float* weights) const {
  router_->route(block, skew_token_key(request, position), k, expert_ids, weights);
}

std::uint64_t skew_token_key(std::int64_t request_id, std::int32_t position) {
  return mix(static_cast<std::uint64_t>(request_id)) ^ static_cast<std::uint64_t>(static_cast<std::uint32_t>(position));
}

StatusOr<double> parse_skew(const std::string& text) {
  const auto bad = [&] {
    return Status::Error("bad skew '" + text + "': expected exp:<lambda> with a number lambda >= 0 (exp:0 is uniform)");
  };
  constexpr std::string_view kPrefix = "exp:";
  if (text.size() <= kPrefix.size() || text.compare(0, kPrefix.size(), kPrefix) != 0) return bad();
  double lambda = 0.0;
  const char* first = text.data() + kPrefix.size();
  const char* last = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(first, last, lambda);
  if (ec != std::errc() || ptr != last || !std::isfinite(lambda) || lambda < 0.0) return bad();
  return lambda == 0.0 ? 0.0 : lambda;  // -0 reads as 0
}

}  // namespace sy
