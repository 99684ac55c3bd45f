#include "engine/plan/expert_rebalance.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sy {
namespace {

using Lists = std::vector<std::vector<std::int32_t>>;  // [expert] -> devices, one block

// What a block's planner sees: its experts' token loads, K, the devices, the slots, and how
// loaded each device already is by the blocks planned before (for ties).
struct BlockProblem {
  std::vector<double> load;  // [expert] tokens
  double k;                  // the least a replica costs
  const std::vector<std::int32_t>* devices;
  std::int32_t num_devices;
  std::int32_t slots;
  const std::vector<double>* carried;  // [device] cost of the blocks planned so far
};

// What one replica of an expert with `load` tokens and `replicas` replicas costs: its even
// share, at least K.
double replica_cost(double load, std::size_t replicas, double k) {
  return std::max(load / static_cast<double>(replicas), k);
}

// Cost per device of one block (tokens when k is 0), replicas taking an even share.
std::vector<double> device_cost(const Lists& lists, const std::vector<double>& load, double k, std::int32_t num_devices) {
  std::vector<double> out(static_cast<std::size_t>(num_devices), 0.0);
  for (std::size_t e = 0; e < lists.size() && e < load.size(); ++e) {
    if (lists[e].empty()) continue;
    const double share = replica_cost(load[e], lists[e].size(), k);
    for (std::int32_t d : lists[e]) out[static_cast<std::size_t>(d)] += share;
  }
  return out;
}

std::vector<double> device_share(const Lists& lists, const std::vector<double>& load, std::int32_t num_devices) {
  return device_cost(lists, load, 0.0, num_devices);
}

double max_over(const std::vector<double>& per_device, const std::vector<std::int32_t>& devices) {
  double m = 0;
  for (std::int32_t d : devices) m = std::max(m, per_device[static_cast<std::size_t>(d)]);
  return m;
}

// Whether device a is a lighter choice than b: by this block's cost, equal costs by what the
// earlier blocks put on them. Without the second rule every block would send its heaviest expert
// to the lowest-numbered device, balancing each layer while piling the run's load on one device.
bool lighter(std::int32_t a, std::int32_t b, const std::vector<double>& cost, const std::vector<double>& carried) {
  const auto i = static_cast<std::size_t>(a), j = static_cast<std::size_t>(b);
  if (cost[i] != cost[j]) return cost[i] < cost[j];
  return carried[i] < carried[j];
}

// MegaScale-Infer §6: minimise max_j C_j with C_j = Σ_i x_ij·max(a_i, K), greedily. The paper
// gives the objective and says "greedy approximation" without the steps; ours, from the current
// placement: take the device with the highest C_j, give its expert with the highest per-replica
// cost one more replica on the least-loaded device that has a free slot and lacks it, as long
// as that lowers the maximum (or, on a tie, the number of devices at it); stop when no
// replica helps or no slot is free. Deviations: the paper's x_ij are free fractions; the
// dispatcher here splits an expert's tokens evenly over its replicas, so x_ij = 1/r_i. And K
// floors each replica (max(a_i/r_i, K)), not the expert before the split: every replica runs
// its own GEMM over its own copy of the weights, so a replica of a cold expert adds cost
// rather than sharing it (the paper's form would make every replica free).
Lists plan_greedy(const Lists& current, const BlockProblem& p) {
  Lists lists = current;
  const auto& devs = *p.devices;
  const auto& carried = *p.carried;
  std::vector<double> load = device_cost(lists, p.load, p.k, p.num_devices);
  std::vector<std::int32_t> used(static_cast<std::size_t>(p.num_devices), 0);
  for (const auto& l : lists)
    for (std::int32_t d : l) ++used[static_cast<std::size_t>(d)];
  for (;;) {
    const double top = max_over(load, devs);
    if (top <= 0) break;
    const double eps = 1e-9 * top;
    std::int32_t hot = devs.front();
    for (std::int32_t d : devs)
      if (lighter(hot, d, load, carried)) hot = d;
    // Its experts, by cost per replica, highest first.
    std::vector<std::int32_t> experts;
    for (std::size_t e = 0; e < lists.size(); ++e)
      if (std::find(lists[e].begin(), lists[e].end(), hot) != lists[e].end()) experts.push_back(static_cast<std::int32_t>(e));
    const auto per_replica = [&](std::int32_t e) {
      return replica_cost(p.load[static_cast<std::size_t>(e)], lists[static_cast<std::size_t>(e)].size(), p.k);
    };
    std::stable_sort(experts.begin(), experts.end(), [&](std::int32_t a, std::int32_t b) { return per_replica(a) > per_replica(b); });
    bool improved = false;
    for (std::int32_t e : experts) {
      auto& holders = lists[static_cast<std::size_t>(e)];
      std::int32_t target = -1;
      for (std::int32_t d : devs) {
        if (used[static_cast<std::size_t>(d)] >= p.slots) continue;
        if (std::find(holders.begin(), holders.end(), d) != holders.end()) continue;
        if (target < 0 || lighter(d, target, load, carried)) target = d;
      }
      if (target < 0) continue;
      const double a = p.load[static_cast<std::size_t>(e)];
      const double was = replica_cost(a, holders.size(), p.k), will = replica_cost(a, holders.size() + 1, p.k);
      std::vector<double> next = load;
      for (std::int32_t h : holders) next[static_cast<std::size_t>(h)] += will - was;
      next[static_cast<std::size_t>(target)] += will;
      const double next_top = max_over(next, devs);
      const bool lower = next_top < top - eps;
      const bool fewer_at_top = next_top <= top + eps && next[static_cast<std::size_t>(hot)] < top - eps;
      if (!lower && !fewer_at_top) continue;
      holders.push_back(target);
      std::sort(holders.begin(), holders.end());
      ++used[static_cast<std::size_t>(target)];
      load = std::move(next);
      improved = true;
      break;
    }
    if (!improved) break;
  }
  return lists;
}

// DeepSeek EPLB (deepseek-ai/EPLB, eplb.py, the global policy for one layer):
// replicate_experts — every physical slot beyond one per expert goes, one at a time, to the
// expert with the highest load per replica; balanced_packing — the replicas, heaviest first,
// each to the lightest device that still has a free slot, every device the same number of
// slots. Deviations: EPLB may put two replicas of one expert on one device; a placement here
// lists a device once per expert, so a replica skips devices that hold its expert, and an
// expert never gets more replicas than there are devices. When the last replicas of an expert
// find only devices that hold it, that replica is dropped (its share goes to the others). With
// K > 0 an expert gets no replica whose share would fall below K (it would cost more than it
// relieves), so slots may stay free. Equal devices are told apart by the earlier blocks' load.
Lists plan_eplb(const BlockProblem& p) {
  const auto& devs = *p.devices;
  const auto E = static_cast<std::int32_t>(p.load.size());
  const auto N = static_cast<std::int32_t>(devs.size());
  std::vector<std::int32_t> replicas(static_cast<std::size_t>(E), 1);
  const auto per = [&](std::int32_t e) { return p.load[static_cast<std::size_t>(e)] / replicas[static_cast<std::size_t>(e)]; };
  for (std::int32_t extra = N * p.slots - E; extra > 0; --extra) {
    std::int32_t best = -1;
    for (std::int32_t e = 0; e < E; ++e) {
      if (replicas[static_cast<std::size_t>(e)] >= N) continue;
      if (p.k > 0 && p.load[static_cast<std::size_t>(e)] / (replicas[static_cast<std::size_t>(e)] + 1) < p.k) continue;
      if (best < 0 || per(e) > per(best)) best = e;
    }
    if (best < 0) break;
    ++replicas[static_cast<std::size_t>(best)];
  }
  struct Item {
    std::int32_t expert;
    double weight;
  };
  std::vector<Item> items;
  for (std::int32_t e = 0; e < E; ++e)
    for (std::int32_t k = 0; k < replicas[static_cast<std::size_t>(e)]; ++k)
      items.push_back({e, replica_cost(p.load[static_cast<std::size_t>(e)], static_cast<std::size_t>(replicas[static_cast<std::size_t>(e)]), p.k)});
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.weight > b.weight; });
  std::vector<double> pack_load(static_cast<std::size_t>(p.num_devices), 0.0);
  std::vector<std::int32_t> pack_count(static_cast<std::size_t>(p.num_devices), 0);
  Lists lists(static_cast<std::size_t>(E));
  for (const Item& it : items) {
    auto& holders = lists[static_cast<std::size_t>(it.expert)];
    std::int32_t best = -1;
    for (std::int32_t d : devs) {
      if (pack_count[static_cast<std::size_t>(d)] >= p.slots) continue;
      if (std::find(holders.begin(), holders.end(), d) != holders.end()) continue;
      if (best < 0 || lighter(d, best, pack_load, *p.carried)) best = d;
    }
    if (best < 0) continue;  // dropped (see above); the expert keeps its other replicas
    pack_load[static_cast<std::size_t>(best)] += it.weight;
    ++pack_count[static_cast<std::size_t>(best)];
    holders.push_back(best);
  }
  for (auto& h : lists) std::sort(h.begin(), h.end());
  return lists;
}

// Σ_b max / Σ_b mean over the expert devices; 1 when there is no load.
double imbalance(const std::vector<std::vector<double>>& per_block, const std::vector<std::int32_t>& devices) {
  double tops = 0, means = 0;
  for (const auto& row : per_block) {
    if (row.empty()) continue;
    double sum = 0;
    for (std::int32_t d : devices) sum += row[static_cast<std::size_t>(d)];
    tops += max_over(row, devices);
    means += sum / static_cast<double>(devices.size());
  }
  return means > 0 ? tops / means : 1.0;
}

double bottleneck(const std::vector<std::vector<double>>& per_block, const std::vector<std::int32_t>& devices) {
  double tops = 0;
  for (const auto& row : per_block)
    if (!row.empty()) tops += max_over(row, devices);
  return tops;
}

Status check_inputs(RebalanceAlgorithm algorithm, const RebalanceInputs& in) {
  const Placement& p = in.current;
  if (in.num_devices <= 0) return Status::Error("the deployment has no devices");
  if (Status s = p.validate(in.num_devices); !s.ok()) return Status::Error("current placement: " + s.message());
  if (in.devices.empty()) return Status::Error("no device may hold experts");
  for (std::size_t i = 0; i < in.devices.size(); ++i) {
    const std::int32_t d = in.devices[i];
    if (d < 0 || d >= in.num_devices)
      return Status::Error("device " + std::to_string(d) + " does not exist (the deployment has " +
                           std::to_string(in.num_devices) + ")");
    if (i > 0 && d <= in.devices[i - 1]) return Status::Error("expert devices must be ascending and distinct");
  }
  if (in.slots_per_device < 1) return Status::Error("slots per device must be at least 1");
  const auto n = static_cast<std::int64_t>(in.devices.size());
  if (in.slots_per_device * n < p.num_experts())
    return Status::Error(std::to_string(in.slots_per_device) + " slots on each of " + std::to_string(n) +
                         " devices cannot hold the " + std::to_string(p.num_experts()) + " experts of a block");
  if (!(in.min_load >= 0) || !std::isfinite(in.min_load)) return Status::Error("min_load must be a finite number >= 0");
  if (static_cast<std::int32_t>(in.load.size()) > p.num_blocks())
    return Status::Error("load has " + std::to_string(in.load.size()) + " blocks; the model has " +
                         std::to_string(p.num_blocks()));
  for (std::size_t b = 0; b < in.load.size(); ++b) {
    if (in.load[b].empty()) continue;
    if (static_cast<std::int32_t>(in.load[b].size()) != p.num_experts())
      return Status::Error("load of block " + std::to_string(b) + " has " + std::to_string(in.load[b].size()) +
                           " experts; the model has " + std::to_string(p.num_experts()));
    for (double v : in.load[b])
      if (!(v >= 0) || !std::isfinite(v))
        return Status::Error("load of block " + std::to_string(b) + " has a negative or non-finite value");
  }
  for (std::int32_t b = 0; b < p.num_blocks(); ++b) {
    if (!p.is_sparse(b)) continue;
    std::vector<std::int32_t> used(static_cast<std::size_t>(in.num_devices), 0);
    for (std::int32_t e = 0; e < p.num_experts(); ++e)
      for (std::int32_t d : p.devices(b, e)) {
        if (!std::binary_search(in.devices.begin(), in.devices.end(), d))
          return Status::Error("expert " + std::to_string(e) + " of block " + std::to_string(b) + " is on device " +
                               std::to_string(d) + ", which is not an expert device");
        ++used[static_cast<std::size_t>(d)];
      }
    if (algorithm == RebalanceAlgorithm::Greedy)
      for (std::int32_t d : in.devices)
        if (used[static_cast<std::size_t>(d)] > in.slots_per_device)
          return Status::Error("device " + std::to_string(d) + " holds " + std::to_string(used[static_cast<std::size_t>(d)]) +
                               " experts of block " + std::to_string(b) + ", more than its " +
                               std::to_string(in.slots_per_device) + " slots");
  }
  return Status::Ok();
}

}  // namespace

std::string_view rebalance_algorithm_name(RebalanceAlgorithm a) {
  return a == RebalanceAlgorithm::Greedy ? "greedy" : "eplb";
}

StatusOr<RebalanceAlgorithm> parse_rebalance_algorithm(std::string_view name) {
  if (name == "greedy") return RebalanceAlgorithm::Greedy;
  if (name == "eplb") return RebalanceAlgorithm::Eplb;
  return Status::Error("unknown rebalance algorithm '" + std::string(name) + "' (known: greedy, eplb)");
}

std::vector<std::vector<double>> predicted_block_load(const Placement& placement,
                                                     const std::vector<std::vector<double>>& load,
                                                     std::int32_t num_devices) {
  std::vector<std::vector<double>> out(static_cast<std::size_t>(placement.num_blocks()));
  for (std::int32_t b = 0; b < placement.num_blocks() && b < static_cast<std::int32_t>(load.size()); ++b) {
    if (!placement.is_sparse(b) || load[static_cast<std::size_t>(b)].empty()) continue;
    out[static_cast<std::size_t>(b)] = device_share(placement.block_devices(b), load[static_cast<std::size_t>(b)], num_devices);
  }
  return out;
}

StatusOr<RebalanceProposal> plan_rebalance(RebalanceAlgorithm algorithm, const RebalanceInputs& in) {
  if (Status s = check_inputs(algorithm, in); !s.ok()) return s;
  RebalanceProposal out;
  out.algorithm = algorithm;
  out.placement = in.current;
  const Placement& cur = in.current;
  std::vector<double> carried(static_cast<std::size_t>(in.num_devices), 0.0);
  for (std::int32_t b = 0; b < cur.num_blocks() && b < static_cast<std::int32_t>(in.load.size()); ++b) {
    const auto& load = in.load[static_cast<std::size_t>(b)];
    if (!cur.is_sparse(b) || load.empty()) continue;
    const BlockProblem p{load, in.min_load, &in.devices, in.num_devices, in.slots_per_device, &carried};
    const Lists& current = cur.block_devices(b);
    Lists next = algorithm == RebalanceAlgorithm::Greedy ? plan_greedy(current, p) : plan_eplb(p);
    // Keep the block as it is unless the plan lowers its bottleneck by the planners' objective
    // (max_j C_j: tokens, each replica charged at least K).
    const double before = max_over(device_cost(current, load, in.min_load, in.num_devices), in.devices);
    const double after = max_over(device_cost(next, load, in.min_load, in.num_devices), in.devices);
    if (after < before * (1 - 1e-9)) {
      for (std::int32_t e = 0; e < cur.num_experts(); ++e)
        if (Status s = out.placement.set(b, e, next[static_cast<std::size_t>(e)]); !s.ok()) return s;
    }
    const auto kept = device_cost(out.placement.block_devices(b), load, in.min_load, in.num_devices);
    for (std::size_t d = 0; d < carried.size(); ++d) carried[d] += kept[d];
  }
  const auto before = predicted_block_load(cur, in.load, in.num_devices);
  const auto after = predicted_block_load(out.placement, in.load, in.num_devices);
  out.load_before.assign(static_cast<std::size_t>(in.num_devices), 0.0);
  out.load_after.assign(static_cast<std::size_t>(in.num_devices), 0.0);
  for (std::size_t b = 0; b < before.size(); ++b)
    for (std::size_t d = 0; d < before[b].size(); ++d) {
      out.load_before[d] += before[b][d];
      out.load_after[d] += after[b][d];
    }
  out.imbalance_before = imbalance(before, in.devices);
  out.imbalance_after = imbalance(after, in.devices);
  const double top_before = bottleneck(before, in.devices), top_after = bottleneck(after, in.devices);
  out.gain = top_before > 0 ? 1 - top_after / top_before : 0.0;
  for (std::int32_t b = 0; b < cur.num_blocks(); ++b) {
    if (!cur.is_sparse(b)) continue;
    for (std::int32_t e = 0; e < cur.num_experts(); ++e) {
      out.replicas_before += static_cast<std::int32_t>(cur.devices(b, e).size());
      out.replicas_after += static_cast<std::int32_t>(out.placement.devices(b, e).size());
      if (cur.devices(b, e) != out.placement.devices(b, e)) ++out.changed_experts;
    }
  }
  return out;
}

nlohmann::json to_json(const RebalanceProposal& p, const Placement& current) {
  nlohmann::json changes = nlohmann::json::array();
  for (std::int32_t b = 0; b < current.num_blocks(); ++b) {
    if (!current.is_sparse(b)) continue;
    for (std::int32_t e = 0; e < current.num_experts(); ++e)
      if (current.devices(b, e) != p.placement.devices(b, e))
        changes.push_back({{"block", b}, {"expert", e}, {"old", current.devices(b, e)}, {"new", p.placement.devices(b, e)}});
  }
  return {{"algorithm", rebalance_algorithm_name(p.algorithm)},
          {"placement", p.placement.to_json()},
          {"load_before", p.load_before},
          {"load_after", p.load_after},
          {"imbalance_before", p.imbalance_before},
          {"imbalance_after", p.imbalance_after},
          {"gain", p.gain},
          {"replicas_before", p.replicas_before},
          {"replicas_after", p.replicas_after},
          {"changes", std::move(changes)}};
}

}  // namespace sy
