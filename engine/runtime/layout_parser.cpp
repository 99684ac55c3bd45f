#include "engine/runtime/layout_parser.h"

#include <algorithm>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

#include "engine/runtime/config_text.h"

namespace sy {
namespace {

std::string expert_range(const ModelConfig& config) {
  if (config.num_experts <= 0) return "the model has no experts";
  return "the model has " + std::to_string(config.num_experts) + " experts (ids 0-" +
         std::to_string(config.num_experts - 1) + ")";
}

std::string type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: return "a date/time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

// Reads one layout text. Every message starts with "<source>:<line>: " where toml++ knows the
// line of the offending key or value.
class LayoutParser {
 public:
  LayoutParser(const std::string& source, const ModelConfig& config) : source_(source), config_(config) {}

  StatusOr<Layout> parse(std::string_view text);

 private:
  struct DeviceEntry {
    std::vector<std::int32_t> experts;
    bool automatic = false;
    toml::source_region where;
  };

  Status error(const toml::source_region& where, const std::string& message) const {
    if (where.begin.line == 0) return error(message);
    return Status::Error(source_ + ":" + std::to_string(where.begin.line) + ": " + message);
  }
  Status error(const std::string& message) const { return Status::Error(source_ + ": " + message); }

  Status check_keys(const toml::table& table, std::initializer_list<std::string_view> allowed,
                    const std::string& what) const;
  StatusOr<std::int32_t> read_int(const toml::node& node, const std::string& what, std::int64_t lo,
                                  std::int64_t hi) const;
  StatusOr<std::string> read_string(const toml::node& node, const std::string& what) const;
  StatusOr<std::int32_t> read_expert(const toml::node& node, const std::string& what) const;
  StatusOr<std::int32_t> read_sparse_block(const toml::node& node, const std::string& what) const;
  StatusOr<std::vector<std::int32_t>> read_devices(const toml::table& table, const std::string& what) const;
  // nullptr when the key is absent; an error when it is present but not an array of tables.
  StatusOr<const toml::array*> tables_of(const toml::table& root, std::string_view key) const;

  Status parse_devices(const toml::table& root);
  Status parse_replicas(const toml::table& root);
  Status parse_overrides(const toml::table& root);
  Status parse_policy(const toml::table& root);
  Status parse_capacity(const toml::table& root);

  const std::string& source_;
  const ModelConfig& config_;
  Layout layout_;
  std::vector<DeviceEntry> entries_;
};

Status LayoutParser::check_keys(const toml::table& table, std::initializer_list<std::string_view> allowed,
                                const std::string& what) const {
  for (auto&& [key, value] : table) {
    (void)value;
    if (std::ranges::find(allowed, key.str()) != allowed.end()) continue;
    return error(key.source(), "unknown key '" + std::string(key.str()) + "' in " + what + " (expected " +
                                   one_of(allowed) + ")" + did_you_mean(key.str(), allowed));
  }
  return Status::Ok();
}

StatusOr<std::int32_t> LayoutParser::read_int(const toml::node& node, const std::string& what, std::int64_t lo,
                                              std::int64_t hi) const {
  const auto* i = node.as_integer();
  if (!i) return error(node.source(), what + " must be an integer, got " + type_name(node));
  const std::int64_t v = i->get();
  if (v < lo || v > hi)
    return error(node.source(), what + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                    "], got " + std::to_string(v));
  return static_cast<std::int32_t>(v);
}

StatusOr<std::string> LayoutParser::read_string(const toml::node& node, const std::string& what) const {
  const auto* s = node.as_string();
  if (!s) return error(node.source(), what + " must be a string, got " + type_name(node));
  return s->get();
}

StatusOr<std::int32_t> LayoutParser::read_expert(const toml::node& node, const std::string& what) const {
  const auto* i = node.as_integer();
  if (!i) return error(node.source(), what + " must be an expert id (integer), got " + type_name(node));
  const std::int64_t v = i->get();
  if (v < 0 || v >= config_.num_experts)
    return error(node.source(), what + " is expert " + std::to_string(v) + ", but " + expert_range(config_));
  return static_cast<std::int32_t>(v);
}

StatusOr<std::int32_t> LayoutParser::read_sparse_block(const toml::node& node, const std::string& what) const {
  const auto* i = node.as_integer();
  if (!i) return error(node.source(), what + " must be a block index (integer), got " + type_name(node));
  const std::int64_t v = i->get();
  if (v < 0 || v >= config_.num_layers)
    return error(node.source(), what + " is block " + std::to_string(v) + ", but the model has " +
                                    std::to_string(config_.num_layers) + " blocks (0-" +
                                    std::to_string(config_.num_layers - 1) + ")");
  if (!config_.is_sparse(static_cast<std::int32_t>(v)))
    return error(node.source(), what + " is block " + std::to_string(v) + ", a dense block (it has no experts)");
  return static_cast<std::int32_t>(v);
}

StatusOr<std::vector<std::int32_t>> LayoutParser::read_devices(const toml::table& table,
                                                               const std::string& what) const {
  const toml::node* node = table.get("devices");
  if (!node) return error(table.source(), what + " has no 'devices' (a list of device names)");
  const auto* array = node->as_array();
  if (!array) return error(node->source(), what + ": devices must be a list of device names, got " + type_name(*node));
  if (array->empty()) return error(node->source(), what + ": devices is empty (the expert would be placed nowhere)");
  std::vector<std::int32_t> out;
  for (const toml::node& item : *array) {
    auto name = read_string(item, what + ": each entry of devices");
    if (!name.ok()) return name.status();
    const std::int32_t d = layout_.device_index(*name);
    if (d < 0) {
      std::string known;
      for (const auto& dev : layout_.devices) known += (known.empty() ? "" : ", ") + dev.name;
      return error(item.source(), what + " names unknown device '" + *name + "' (devices: " + known + ")");
    }
    if (std::find(out.begin(), out.end(), d) != out.end())
      return error(item.source(), what + " lists device '" + *name + "' twice");
    out.push_back(d);
  }
  return out;
}

StatusOr<const toml::array*> LayoutParser::tables_of(const toml::table& root, std::string_view key) const {
  const toml::node* node = root.get(key);
  if (!node) return static_cast<const toml::array*>(nullptr);
  const auto* array = node->as_array();
  if (!array || !array->is_array_of_tables())
    return error(node->source(), "'" + std::string(key) + "' must be written as [[" + std::string(key) +
                                     "]] tables, got " + type_name(*node));
  return array;
}

Status LayoutParser::parse_devices(const toml::table& root) {
  auto tables = tables_of(root, "device");
  if (!tables.ok()) return tables.status();
  if (!*tables || (*tables)->empty())
    return error("no [[device]] tables: a layout lists its devices, at least one with attention = true");
  std::map<std::string, std::uint32_t> first_line;
  std::int32_t index = 0;
  for (const toml::node& node : **tables) {
    const toml::table& t = *node.as_table();
    const std::string what = "[[device]] #" + std::to_string(index + 1);
    SY_RETURN_IF_ERROR(check_keys(t, {"name", "attention", "experts", "rank", "memory_gb", "gpu"}, what));
    const toml::node* name_node = t.get("name");
    if (!name_node) return error(t.source(), what + " has no name");
    auto name = read_string(*name_node, what + ": name");
    if (!name.ok()) return name.status();
    if (!valid_device_name(*name))
      return error(name_node->source(), what + ": name must be non-empty text without control characters");
    if (auto it = first_line.find(*name); it != first_line.end())
      return error(name_node->source(), "duplicate device name '" + *name + "' (first defined on line " +
                                            std::to_string(it->second) + ")");
    first_line.emplace(*name, name_node->source().begin.line);

    DeviceSpec spec;
    spec.name = *name;
    const std::string dev = "device '" + *name + "'";
    if (const toml::node* a = t.get("attention")) {
      const auto* b = a->as_boolean();
      if (!b) return error(a->source(), dev + ": attention must be true or false, got " + type_name(*a));
      spec.attention = b->get();
    }
    if (const toml::node* r = t.get("rank")) {
      // The upper bound (the launcher's world size) is only known at start-up, where it is checked.
      auto process = read_int(*r, dev + ": rank", 0, 1 << 20);
      if (!process.ok()) return process.status();
      spec.process = *process;
    }
    if (const toml::node* m = t.get("memory_gb")) {
      const std::optional<double> gb = m->value<double>();  // an integer reads as a number too
      if (!gb || !(*gb > 0) || *gb > 1e9)
        return error(m->source(), dev + ": memory_gb must be a positive number of GB, got " +
                                      (gb ? format_double(*gb) : type_name(*m)));
      spec.memory_gb = *gb;
    }
    if (const toml::node* g = t.get("gpu")) {
      auto gpu = read_int(*g, dev + ": gpu", 0, 1023);
      if (!gpu.ok()) return gpu.status();
      spec.gpu = *gpu;
    }
    DeviceEntry entry;
    entry.where = t.source();
    if (const toml::node* e = t.get("experts")) {
      if (const auto* s = e->as_string()) {
        if (s->get() != "auto")
          return error(e->source(), dev + ": experts must be a list of expert ids or \"auto\", got \"" + s->get() + "\"");
        entry.automatic = true;
      } else if (const auto* list = e->as_array()) {
        for (const toml::node& item : *list) {
          auto id = read_expert(item, dev + ": an entry of experts");
          if (!id.ok()) return id.status();
          if (std::find(entry.experts.begin(), entry.experts.end(), *id) != entry.experts.end())
            return error(item.source(), dev + " lists expert " + std::to_string(*id) + " twice");
          entry.experts.push_back(*id);
        }
      } else {
        return error(e->source(), dev + ": experts must be a list of expert ids or \"auto\", got " + type_name(*e));
      }
    }
    layout_.devices.push_back(std::move(spec));
    entries_.push_back(std::move(entry));
    ++index;
  }

  std::int32_t rank = 0;
  for (DeviceSpec& d : layout_.devices)
    if (d.attention) d.attention_rank = rank++;
  if (rank == 0) return error("no device runs attention: set attention = true on at least one [[device]]");

  // Base placement: explicit lists in every sparse block, then the "auto" devices share all
  // experts round-robin in file order.
  std::vector<std::int32_t> automatic;
  for (std::int32_t d = 0; d < layout_.num_devices(); ++d)
    if (entries_[d].automatic) automatic.push_back(d);
  for (std::int32_t b = 0; b < config_.num_layers; ++b) {
    if (!config_.is_sparse(b)) continue;
    for (std::int32_t d = 0; d < layout_.num_devices(); ++d)
      for (std::int32_t e : entries_[d].experts) SY_RETURN_IF_ERROR(layout_.placement.add(b, e, d));
    if (automatic.empty()) continue;
    for (std::int32_t e = 0; e < config_.num_experts; ++e) {
      const std::int32_t d = automatic[static_cast<std::size_t>(e) % automatic.size()];
      SY_RETURN_IF_ERROR(layout_.placement.add(b, e, d));
    }
  }
  return Status::Ok();
}

Status LayoutParser::parse_replicas(const toml::table& root) {
  auto tables = tables_of(root, "replica");
  if (!tables.ok()) return tables.status();
  if (!*tables) return Status::Ok();
  std::int32_t index = 0;
  for (const toml::node& node : **tables) {
    const toml::table& t = *node.as_table();
    std::string what = "[[replica]] #" + std::to_string(++index);
    SY_RETURN_IF_ERROR(check_keys(t, {"expert", "devices", "blocks"}, what));
    const toml::node* expert_node = t.get("expert");
    if (!expert_node) return error(t.source(), what + " has no expert");
    auto expert = read_expert(*expert_node, what + ": expert");
    if (!expert.ok()) return expert.status();
    what = "replica of expert " + std::to_string(*expert);
    auto devices = read_devices(t, what);
    if (!devices.ok()) return devices.status();

    std::vector<std::int32_t> blocks;
    const toml::node* blocks_node = t.get("blocks");
    const auto* blocks_text = blocks_node ? blocks_node->as_string() : nullptr;
    if (!blocks_node || (blocks_text && blocks_text->get() == "all")) {
      for (std::int32_t b = 0; b < config_.num_layers; ++b)
        if (config_.is_sparse(b)) blocks.push_back(b);
    } else if (const auto* list = blocks_node->as_array()) {
      if (list->empty()) return error(blocks_node->source(), what + ": blocks is empty (write \"all\" or block indices)");
      for (const toml::node& item : *list) {
        auto b = read_sparse_block(item, what + ": an entry of blocks");
        if (!b.ok()) return b.status();
        if (std::find(blocks.begin(), blocks.end(), *b) != blocks.end())
          return error(item.source(), what + " lists block " + std::to_string(*b) + " twice");
        blocks.push_back(*b);
      }
    } else {
      return error(blocks_node->source(), what + ": blocks must be \"all\" or a list of block indices");
    }
    for (std::int32_t b : blocks) {
      for (std::int32_t d : *devices) {
        if (layout_.placement.holds(b, *expert, d))
          return error(t.source(), what + " on '" + layout_.devices[d].name + "': the device already holds expert " +
                                       std::to_string(*expert) + " in block " + std::to_string(b));
        SY_RETURN_IF_ERROR(layout_.placement.add(b, *expert, d));
      }
    }
  }
  return Status::Ok();
}

Status LayoutParser::parse_overrides(const toml::table& root) {
  auto tables = tables_of(root, "override");
  if (!tables.ok()) return tables.status();
  if (!*tables) return Status::Ok();
  std::map<std::pair<std::int32_t, std::int32_t>, std::uint32_t> seen;
  std::int32_t index = 0;
  for (const toml::node& node : **tables) {
    const toml::table& t = *node.as_table();
    const std::string what = "[[override]] #" + std::to_string(++index);
    SY_RETURN_IF_ERROR(check_keys(t, {"block", "expert", "devices"}, what));
    const toml::node* block_node = t.get("block");
    if (!block_node) return error(t.source(), what + " has no block");
    auto block = read_sparse_block(*block_node, what + ": block");
    if (!block.ok()) return block.status();
    const toml::node* expert_node = t.get("expert");
    if (!expert_node) return error(t.source(), what + " has no expert");
    auto expert = read_expert(*expert_node, what + ": expert");
    if (!expert.ok()) return expert.status();
    const std::string slot = "override of block " + std::to_string(*block) + " expert " + std::to_string(*expert);
    if (auto it = seen.find({*block, *expert}); it != seen.end())
      return error(t.source(), "second " + slot + " (the first is on line " + std::to_string(it->second) + ")");
    seen.emplace(std::make_pair(*block, *expert), t.source().begin.line);
    auto devices = read_devices(t, slot);
    if (!devices.ok()) return devices.status();
    SY_RETURN_IF_ERROR(layout_.placement.set(*block, *expert, std::move(*devices)));
  }
  return Status::Ok();
}

Status LayoutParser::parse_policy(const toml::table& root) {
  const toml::node* node = root.get("policy");
  if (!node) return Status::Ok();
  const auto* t = node->as_table();
  if (!t) return error(node->source(), "'policy' must be a [policy] table, got " + type_name(*node));
  SY_RETURN_IF_ERROR(check_keys(*t,
                                {"name", "scheduler", "lookahead", "decay", "microbatches", "expert_chunks", "order",
                                 "barrier", "gate", "adaptive_pingpong_from", "adaptive_async_from"},
                                "[policy]"));
  PolicySpec& p = layout_.policy;
  for (auto&& [key, value] : *t) {
    const std::string what = "policy." + std::string(key.str());
    const std::string_view k = key.str();
    if (k == "name" || k == "scheduler" || k == "order" || k == "barrier" || k == "gate") {
      auto s = read_string(value, what);
      if (!s.ok()) return s.status();
      (k == "name"        ? p.policy
       : k == "scheduler" ? p.scheduler
       : k == "order"     ? p.order
       : k == "barrier"   ? p.barrier
                          : p.gate) = *s;
    } else if (k == "lookahead") {
      auto v = read_int(value, what, 0, kMaxLookahead);
      if (!v.ok()) return v.status();
      p.lookahead = *v;
    } else if (k == "microbatches") {
      auto v = read_int(value, what, 1, kMaxMicrobatches);
      if (!v.ok()) return v.status();
      p.microbatches = *v;
    } else if (k == "expert_chunks") {
      auto v = read_int(value, what, 1, kMaxExpertChunks);
      if (!v.ok()) return v.status();
      p.expert_chunks = *v;
    } else {  // decay, adaptive_*: an integer (decay = 1) is a float here
      double& out = k == "decay" ? p.decay : k == "adaptive_pingpong_from" ? p.adaptive_pingpong_from : p.adaptive_async_from;
      if (const auto* f = value.as_floating_point()) {
        out = f->get();
      } else if (const auto* i = value.as_integer()) {
        out = static_cast<double>(i->get());
      } else {
        return error(value.source(), what + " must be a number, got " + type_name(value));
      }
      // On the key's line, as the integers' ranges are (the whole policy's check below has only
      // the table's).
      if (Status s = validate_policy_number(k, out); !s.ok()) return error(value.source(), "policy." + s.message());
    }
  }
  Status s = validate_policy(p);
  if (!s.ok()) return error(t->source(), "[policy]: " + s.message());
  return Status::Ok();
}

Status LayoutParser::parse_capacity(const toml::table& root) {
  const toml::node* node = root.get("capacity");
  if (!node) return Status::Ok();
  const auto* t = node->as_table();
  if (!t) return error(node->source(), "'capacity' must be a [capacity] table, got " + type_name(*node));
  SY_RETURN_IF_ERROR(check_keys(*t, {"kv_pages_per_rank", "page_size", "max_batch"}, "[capacity]"));
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  CapacitySpec& c = layout_.capacity;
  for (auto&& [key, value] : *t) {
    auto v = read_int(value, "capacity." + std::string(key.str()), 1, kMax);
    if (!v.ok()) return v.status();
    const std::string_view k = key.str();
    (k == "kv_pages_per_rank" ? c.kv_pages_per_rank : k == "page_size" ? c.page_size : c.max_batch) = *v;
  }
  return Status::Ok();
}

StatusOr<Layout> LayoutParser::parse(std::string_view text) {
  SY_RETURN_IF_ERROR(check_model_for_layout(config_));
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(source_));
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    return Status::Error(source_ + ":" + std::to_string(where.line) + ":" + std::to_string(where.column) +
                         ": TOML syntax error: " + std::string(e.description()));
  }
  SY_RETURN_IF_ERROR(check_keys(root, {"name", "device", "replica", "override", "policy", "capacity"}, "the layout"));
  if (const toml::node* n = root.get("name")) {
    auto name = read_string(*n, "name");
    if (!name.ok()) return name.status();
    layout_.name = *name;
  } else {
    layout_.name = std::filesystem::path(source_).stem().string();
  }
  layout_.placement = Placement(config_);
  SY_RETURN_IF_ERROR(parse_devices(root));
  SY_RETURN_IF_ERROR(parse_replicas(root));
  SY_RETURN_IF_ERROR(parse_overrides(root));
  SY_RETURN_IF_ERROR(parse_policy(root));
  SY_RETURN_IF_ERROR(parse_capacity(root));

  const auto experts = layout_.placement.experts_by_device(layout_.num_devices());
  for (std::int32_t d = 0; d < layout_.num_devices(); ++d) {
    DeviceSpec& dev = layout_.devices[d];
    dev.holds_experts = !experts[static_cast<std::size_t>(d)].empty();
    if (!dev.attention && !dev.holds_experts)
      return error(entries_[d].where, "device '" + dev.name +
                                          "' neither runs attention nor holds any expert (give it attention = "
                                          "true, experts, or remove it)");
  }
  Status placed = layout_.placement.validate(layout_.num_devices());
  if (!placed.ok()) return error(placed.message());
  // Whatever passed the checks above is structurally sound; this only guards the two paths
  // (parser, validate_layout) from drifting apart.
  Status whole = validate_layout(layout_, config_);
  if (!whole.ok()) return error(whole.message());
  return std::move(layout_);
}

}  // namespace

StatusOr<Layout> parse_layout(std::string_view text, const std::string& source, const ModelConfig& config) {
  LayoutParser parser(source, config);
  return parser.parse(text);
}

StatusOr<Layout> load_layout(const std::filesystem::path& path, const ModelConfig& config) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("cannot open layout file " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Error("cannot read layout file " + path.string());
  return parse_layout(text.str(), path.string(), config);
}

}  // namespace sy
