#include "console/model/placement_preview.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace sy::console {

std::string PlacementChange::command_json() const {
  nlohmann::json j;
  if (kind == Kind::Move) {
    j = {{"cmd", "move_expert"}, {"block", block}, {"expert", expert}, {"from", from}, {"to", to}};
  } else {
    j = {{"cmd", "replicate_expert"}, {"block", block}, {"expert", expert}, {"to", to}};
  }
  return j.dump();
}

StatusOr<LoadPreview> preview_placement(const Placement& placement, std::int32_t device_count,
                                                   const LoadWindow& window, const PlacementChange& change) {
  const auto blocks = static_cast<std::int32_t>(placement.size());
  if (blocks == 0) return Status::Error("the current placement is not known yet (no run metadata)");
  if (change.block < -1 || change.block >= blocks)
    return Status::Error("block " + std::to_string(change.block) + " does not exist (the model has " +
                         std::to_string(blocks) + " blocks; -1 means every block)");
  if (change.to < 0 || change.to >= device_count)
    return Status::Error("target device " + std::to_string(change.to) + " does not exist (" +
                         std::to_string(device_count) + " devices)");
  if (change.kind == PlacementChange::Kind::Move) {
    if (change.from < 0 || change.from >= device_count)
      return Status::Error("source device " + std::to_string(change.from) + " does not exist");
    if (change.from == change.to) return Status::Error("source and target device are the same");
  }

  LoadPreview p;
  p.before.assign(static_cast<std::size_t>(device_count), 0.0);
  // tokens[block][expert][device] as measured in the window.
  std::vector<std::vector<std::vector<double>>> measured(static_cast<std::size_t>(blocks));
  for (std::int32_t b = 0; b < blocks; ++b)
    measured[static_cast<std::size_t>(b)].assign(placement[static_cast<std::size_t>(b)].size(),
                                                 std::vector<double>(static_cast<std::size_t>(device_count), 0.0));
  for (const auto& r : window.records) {
    if (r.block < 0 || r.block >= blocks || r.device < 0 || r.device >= device_count) continue;
    auto& experts = measured[static_cast<std::size_t>(r.block)];
    if (r.expert < 0 || static_cast<std::size_t>(r.expert) >= experts.size()) continue;
    experts[static_cast<std::size_t>(r.expert)][static_cast<std::size_t>(r.device)] += static_cast<double>(r.tokens);
    p.before[static_cast<std::size_t>(r.device)] += static_cast<double>(r.tokens);
  }
  p.after = p.before;
  p.placement_after = placement;

  // With block -1 the change applies to the blocks where it can; it is an error only when it
  // applies nowhere.
  const bool every_block = change.block < 0;
  std::int32_t changed = 0;
  std::string first_error;
  const std::int32_t first = change.block < 0 ? 0 : change.block;
  const std::int32_t last = change.block < 0 ? blocks - 1 : change.block;
  for (std::int32_t b = first; b <= last; ++b) {
    auto& experts = p.placement_after[static_cast<std::size_t>(b)];
    if (change.expert < 0 || static_cast<std::size_t>(change.expert) >= experts.size())
      return Status::Error("expert " + std::to_string(change.expert) + " does not exist in block " +
                           std::to_string(b) + " (" + std::to_string(experts.size()) + " experts)");
    auto& replicas = experts[static_cast<std::size_t>(change.expert)];
    const auto& tokens = measured[static_cast<std::size_t>(b)][static_cast<std::size_t>(change.expert)];
    const bool to_holds = std::find(replicas.begin(), replicas.end(), change.to) != replicas.end();
    const std::string where = "expert " + std::to_string(change.expert) + " of block " + std::to_string(b);

    if (change.kind == PlacementChange::Kind::Move) {
      auto from_it = std::find(replicas.begin(), replicas.end(), change.from);
      std::string error;
      if (from_it == replicas.end())
        error = "device " + std::to_string(change.from) + " holds no replica of " + where;
      else if (to_holds)
        error = "device " + std::to_string(change.to) + " already holds a replica of " + where;
      if (!error.empty()) {
        if (!every_block) return Status::Error(error);
        if (first_error.empty()) first_error = error;
        continue;
      }
      ++changed;
      *from_it = change.to;
      const double moved = tokens[static_cast<std::size_t>(change.from)];
      p.after[static_cast<std::size_t>(change.from)] -= moved;
      p.after[static_cast<std::size_t>(change.to)] += moved;
    } else {
      if (to_holds) {
        const std::string error = "device " + std::to_string(change.to) + " already holds a replica of " + where;
        if (!every_block) return Status::Error(error);
        if (first_error.empty()) first_error = error;
        continue;
      }
      ++changed;
      double total = 0;
      for (std::int32_t d : replicas) {
        if (d < 0 || d >= device_count) continue;
        total += tokens[static_cast<std::size_t>(d)];
        p.after[static_cast<std::size_t>(d)] -= tokens[static_cast<std::size_t>(d)];
      }
      replicas.push_back(change.to);
      const double share = total / static_cast<double>(replicas.size());
      for (std::int32_t d : replicas)
        if (d >= 0 && d < device_count) p.after[static_cast<std::size_t>(d)] += share;
    }
  }
  if (changed == 0) return Status::Error("the change applies to no block: " + first_error);
  return p;
}

StatusOr<LoadPreview> preview_whole_placement(const Placement& current, const Placement& proposed,
                                              std::int32_t device_count, const LoadWindow& window) {
  if (current.empty()) return Status::Error("the current placement is not known yet (no run metadata)");
  if (proposed.size() != current.size())
    return Status::Error("the proposed placement has " + std::to_string(proposed.size()) + " blocks; the model has " +
                         std::to_string(current.size()));
  for (std::size_t b = 0; b < proposed.size(); ++b) {
    if (proposed[b].size() != current[b].size())
      return Status::Error("block " + std::to_string(b) + " of the proposed placement has " +
                           std::to_string(proposed[b].size()) + " experts, not " + std::to_string(current[b].size()));
    for (const auto& devices : proposed[b])
      for (std::int32_t d : devices)
        if (d < 0 || d >= device_count)
          return Status::Error("the proposed placement names device " + std::to_string(d) + " (there are " +
                               std::to_string(device_count) + ")");
  }
  LoadPreview p;
  p.before.assign(static_cast<std::size_t>(device_count), 0.0);
  p.after.assign(static_cast<std::size_t>(device_count), 0.0);
  p.placement_after = proposed;
  // Tokens per (block, expert) whichever replica took them.
  std::vector<std::vector<double>> tokens(current.size());
  for (std::size_t b = 0; b < current.size(); ++b) tokens[b].assign(current[b].size(), 0.0);
  for (const auto& r : window.records) {
    if (r.block < 0 || static_cast<std::size_t>(r.block) >= tokens.size() || r.device < 0 || r.device >= device_count) continue;
    auto& row = tokens[static_cast<std::size_t>(r.block)];
    if (r.expert < 0 || static_cast<std::size_t>(r.expert) >= row.size()) continue;
    row[static_cast<std::size_t>(r.expert)] += static_cast<double>(r.tokens);
    p.before[static_cast<std::size_t>(r.device)] += static_cast<double>(r.tokens);
  }
  for (std::size_t b = 0; b < proposed.size(); ++b)
    for (std::size_t e = 0; e < proposed[b].size(); ++e) {
      const auto& devices = proposed[b][e];
      if (devices.empty()) continue;
      const double share = tokens[b][e] / static_cast<double>(devices.size());
      for (std::int32_t d : devices) p.after[static_cast<std::size_t>(d)] += share;
    }
  return p;
}

}  // namespace sy::console
