#include "engine/runtime/layout.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include <toml++/toml.h>

namespace sy {
namespace {

constexpr std::string_view kPolicies[] = {"async", "pingpong", "sync"};
constexpr std::string_view kSchedulers[] = {"defrag", "mtfs", "flfs"};
constexpr std::int32_t kMaxMicrobatches = 64;

template <class Range>
bool contains(const Range& range, std::string_view s) {
  return std::find(std::begin(range), std::end(range), s) != std::end(range);
}

// "a, b or c": how the messages list the accepted values.
std::string one_of(std::initializer_list<std::string_view> items) {
  std::string out;
  std::size_t i = 0;
  for (std::string_view item : items) {
    if (i > 0) out += (i + 1 == items.size()) ? " or " : ", ";
    out += item;
    ++i;
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Typos are the usual cause of an unknown key: point at the key that was probably meant.
std::string did_you_mean(std::string_view key, std::initializer_list<std::string_view> allowed) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (std::string_view candidate : allowed) {
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best.empty() ? std::string() : "; did you mean '" + std::string(best) + "'?";
}

bool has_control_chars(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// A TOML basic string literal.
std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// Shortest text that reads back to the same double, always in TOML float syntax.
std::string format_double(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string format_int_list(const std::vector<std::int32_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

std::string expert_range(const ModelConfig& config) {
  if (config.num_experts <= 0) return "the model has no experts";
  return "the model has " + std::to_string(config.num_experts) + " experts (ids 0-" +
         std::to_string(config.num_experts - 1) + ")";
}

Status check_model(const ModelConfig& config) {
  if (config.num_layers < 0 || config.num_experts < 0 ||
      config.sparse_layers.size() != static_cast<std::size_t>(config.num_layers))
    return Status::Error("model config: sparse_layers has " + std::to_string(config.sparse_layers.size()) +
                         " entries for " + std::to_string(config.num_layers) + " layers");
  return Status::Ok();
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
    if (contains(allowed, key.str())) continue;
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
    SY_RETURN_IF_ERROR(check_keys(t, {"name", "attention", "experts"}, what));
    const toml::node* name_node = t.get("name");
    if (!name_node) return error(t.source(), what + " has no name");
    auto name = read_string(*name_node, what + ": name");
    if (!name.ok()) return name.status();
    if (name->empty() || has_control_chars(*name))
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
  SY_RETURN_IF_ERROR(check_keys(*t, {"name", "scheduler", "lookahead", "decay", "microbatches"}, "[policy]"));
  PolicySpec& p = layout_.policy;
  constexpr std::int64_t kMax = std::numeric_limits<std::int32_t>::max();
  for (auto&& [key, value] : *t) {
    const std::string what = "policy." + std::string(key.str());
    const std::string_view k = key.str();
    if (k == "name" || k == "scheduler") {
      auto s = read_string(value, what);
      if (!s.ok()) return s.status();
      (k == "name" ? p.policy : p.scheduler) = *s;
    } else if (k == "lookahead") {
      auto v = read_int(value, what, 0, kMax);
      if (!v.ok()) return v.status();
      p.lookahead = *v;
    } else if (k == "microbatches") {
      auto v = read_int(value, what, 1, kMaxMicrobatches);
      if (!v.ok()) return v.status();
      p.microbatches = *v;
    } else {  // decay: an integer (decay = 1) is a float here
      if (const auto* f = value.as_floating_point()) {
        p.decay = f->get();
      } else if (const auto* i = value.as_integer()) {
        p.decay = static_cast<double>(i->get());
      } else {
        return error(value.source(), what + " must be a number, got " + type_name(value));
      }
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
  SY_RETURN_IF_ERROR(check_model(config_));
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

  for (std::int32_t d = 0; d < layout_.num_devices(); ++d) {
    DeviceSpec& dev = layout_.devices[d];
    dev.holds_experts = !layout_.placement.experts_on(d).empty();
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

// ---- PolicySpec ----------------------------------------------------------------------------

Status validate_policy(const PolicySpec& p) {
  if (!contains(kPolicies, p.policy))
    return Status::Error("unknown policy '" + p.policy + "' (expected " + one_of({"async", "pingpong", "sync"}) + ")");
  if (!contains(kSchedulers, p.scheduler))
    return Status::Error("unknown scheduler '" + p.scheduler + "' (expected " + one_of({"defrag", "mtfs", "flfs"}) +
                         ")");
  if (p.lookahead < 0) return Status::Error("lookahead must be >= 0, got " + std::to_string(p.lookahead));
  if (!(p.decay > 0.0 && p.decay <= 1.0))  // written so that NaN fails too
    return Status::Error("decay must be in (0, 1], got " + format_double(p.decay));
  if (p.microbatches < 1 || p.microbatches > kMaxMicrobatches)
    return Status::Error("microbatches must be in [1, " + std::to_string(kMaxMicrobatches) + "], got " +
                         std::to_string(p.microbatches));
  return Status::Ok();
}

StatusOr<PolicySpec> PolicySpec::from_json(const nlohmann::json& changes, const PolicySpec& base) {
  if (!changes.is_object()) return Status::Error("policy: expected a JSON object, got " + changes.dump());
  PolicySpec p = base;
  const auto read_int = [](const nlohmann::json& v, const std::string& key) -> StatusOr<std::int32_t> {
    constexpr auto kMax = std::numeric_limits<std::int32_t>::max();
    constexpr auto kMin = std::numeric_limits<std::int32_t>::min();
    if (!v.is_number_integer()) return Status::Error("policy: " + key + " must be an integer, got " + v.dump());
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax)
                               : (v.get<std::int64_t>() > kMax || v.get<std::int64_t>() < kMin))
      return Status::Error("policy: " + key + " is out of range: " + v.dump());
    return static_cast<std::int32_t>(v.get<std::int64_t>());
  };
  for (const auto& [key, value] : changes.items()) {
    if (key == "name" || key == "scheduler") {
      if (!value.is_string()) return Status::Error("policy: " + key + " must be a string, got " + value.dump());
      (key == "name" ? p.policy : p.scheduler) = value.get<std::string>();
    } else if (key == "lookahead" || key == "microbatches") {
      auto v = read_int(value, key);
      if (!v.ok()) return v.status();
      (key == "lookahead" ? p.lookahead : p.microbatches) = *v;
    } else if (key == "decay") {
      if (!value.is_number()) return Status::Error("policy: decay must be a number, got " + value.dump());
      p.decay = value.get<double>();
    } else {
      const std::initializer_list<std::string_view> kKeys = {"name", "scheduler", "lookahead", "decay",
                                                                 "microbatches"};
      return Status::Error("policy: unknown key '" + key + "' (expected " + one_of(kKeys) + ")" +
                           did_you_mean(key, kKeys));
    }
  }
  Status s = validate_policy(p);
  if (!s.ok()) return Status::Error("policy: " + s.message());
  return p;
}

StatusOr<PolicySpec> PolicySpec::from_json(const nlohmann::json& changes) {
  return from_json(changes, PolicySpec{});
}

nlohmann::json PolicySpec::to_json() const {
  return {{"name", policy},
          {"scheduler", scheduler},
          {"lookahead", lookahead},
          {"decay", decay},
          {"microbatches", microbatches}};
}

Status validate_capacity(const CapacitySpec& c) {
  if (c.kv_pages_per_rank < 1)
    return Status::Error("kv_pages_per_rank must be >= 1, got " + std::to_string(c.kv_pages_per_rank));
  if (c.page_size < 1) return Status::Error("page_size must be >= 1, got " + std::to_string(c.page_size));
  if (c.max_batch < 1) return Status::Error("max_batch must be >= 1, got " + std::to_string(c.max_batch));
  return Status::Ok();
}

// ---- Placement -----------------------------------------------------------------------------

Placement::Placement(std::int32_t num_blocks, std::int32_t num_experts, std::vector<bool> sparse)
    : num_experts_(num_experts), sparse_(std::move(sparse)) {
  assert(num_blocks >= 0 && num_experts >= 0 && sparse_.size() == static_cast<std::size_t>(num_blocks));
  (void)num_blocks;
  slots_.resize(sparse_.size());
  for (std::size_t b = 0; b < sparse_.size(); ++b)
    if (sparse_[b]) slots_[b].resize(static_cast<std::size_t>(num_experts_));
}

Placement::Placement(const ModelConfig& config)
    : Placement(config.num_layers, config.num_experts, config.sparse_layers) {}

const std::vector<std::int32_t>& Placement::devices(std::int32_t block, std::int32_t expert) const {
  static const std::vector<std::int32_t> kNone;
  assert(block >= 0 && block < num_blocks() && expert >= 0 && expert < num_experts_);
  if (!sparse_[static_cast<std::size_t>(block)]) return kNone;
  return slots_[static_cast<std::size_t>(block)][static_cast<std::size_t>(expert)];
}

bool Placement::holds(std::int32_t block, std::int32_t expert, std::int32_t device) const {
  const auto& d = devices(block, expert);
  return std::binary_search(d.begin(), d.end(), device);
}

std::vector<BlockExpert> Placement::experts_on(std::int32_t device) const {
  std::vector<BlockExpert> out;
  for (std::int32_t b = 0; b < num_blocks(); ++b) {
    if (!is_sparse(b)) continue;
    for (std::int32_t e = 0; e < num_experts_; ++e)
      if (holds(b, e, device)) out.push_back({b, e});
  }
  return out;
}

Status Placement::check_slot(std::int32_t block, std::int32_t expert) const {
  if (block < 0 || block >= num_blocks())
    return Status::Error("block " + std::to_string(block) + " is out of range (the model has " +
                         std::to_string(num_blocks()) + " blocks)");
  if (!is_sparse(block)) return Status::Error("block " + std::to_string(block) + " is dense (it has no experts)");
  if (expert < 0 || expert >= num_experts_)
    return Status::Error("expert " + std::to_string(expert) + " is out of range (the model has " +
                         std::to_string(num_experts_) + " experts)");
  return Status::Ok();
}

Status Placement::set(std::int32_t block, std::int32_t expert, std::vector<std::int32_t> devices) {
  SY_RETURN_IF_ERROR(check_slot(block, expert));
  std::sort(devices.begin(), devices.end());
  if (!devices.empty() && devices.front() < 0)
    return Status::Error("block " + std::to_string(block) + " expert " + std::to_string(expert) +
                         ": negative device index " + std::to_string(devices.front()));
  if (auto dup = std::adjacent_find(devices.begin(), devices.end()); dup != devices.end())
    return Status::Error("block " + std::to_string(block) + " expert " + std::to_string(expert) + ": device " +
                         std::to_string(*dup) + " listed twice");
  slots_[static_cast<std::size_t>(block)][static_cast<std::size_t>(expert)] = std::move(devices);
  return Status::Ok();
}

Status Placement::add(std::int32_t block, std::int32_t expert, std::int32_t device) {
  SY_RETURN_IF_ERROR(check_slot(block, expert));
  std::vector<std::int32_t> d = devices(block, expert);
  d.push_back(device);
  return set(block, expert, std::move(d));
}

Status Placement::validate(std::int32_t num_devices) const {
  for (std::int32_t b = 0; b < num_blocks(); ++b) {
    if (!is_sparse(b)) continue;
    for (std::int32_t e = 0; e < num_experts_; ++e) {
      const auto& d = devices(b, e);
      if (d.empty())
        return Status::Error("block " + std::to_string(b) + " expert " + std::to_string(e) +
                             " is placed on no device");
      if (d.back() >= num_devices)
        return Status::Error("block " + std::to_string(b) + " expert " + std::to_string(e) + " is placed on device " +
                             std::to_string(d.back()) + ", but there are " + std::to_string(num_devices) + " devices");
    }
  }
  return Status::Ok();
}

// ---- Layout --------------------------------------------------------------------------------

std::int32_t Layout::num_attention_ranks() const {
  return static_cast<std::int32_t>(
      std::count_if(devices.begin(), devices.end(), [](const DeviceSpec& d) { return d.attention; }));
}

std::vector<std::int32_t> Layout::attention_devices() const {
  std::vector<std::int32_t> out;
  for (std::int32_t d = 0; d < num_devices(); ++d)
    if (devices[d].attention) out.push_back(d);
  return out;
}

std::int32_t Layout::device_index(std::string_view device_name) const {
  for (std::int32_t d = 0; d < num_devices(); ++d)
    if (devices[d].name == device_name) return d;
  return -1;
}

std::string Layout::to_toml() const {
  std::ostringstream out;
  out << "# Switchyard deployment layout (format: layouts/README.md)\n";
  out << "name = " << quote(name) << "\n";
  // The experts each device holds in every sparse block: its [[device]] experts list.
  std::vector<std::vector<std::int32_t>> base(devices.size());
  bool any_sparse = false;
  for (std::int32_t b = 0; b < placement.num_blocks(); ++b) any_sparse = any_sparse || placement.is_sparse(b);
  for (std::int32_t d = 0; d < num_devices() && any_sparse; ++d) {
    for (std::int32_t e = 0; e < placement.num_experts(); ++e) {
      bool everywhere = true;
      for (std::int32_t b = 0; b < placement.num_blocks() && everywhere; ++b)
        everywhere = !placement.is_sparse(b) || placement.holds(b, e, d);
      if (everywhere) base[d].push_back(e);
    }
  }
  for (std::int32_t d = 0; d < num_devices(); ++d) {
    out << "\n[[device]]\nname = " << quote(devices[d].name) << "\n";
    if (devices[d].attention) out << "attention = true\n";
    if (!base[d].empty()) out << "experts = " << format_int_list(base[d]) << "\n";
  }
  for (std::int32_t b = 0; b < placement.num_blocks(); ++b) {
    if (!placement.is_sparse(b)) continue;
    for (std::int32_t e = 0; e < placement.num_experts(); ++e) {
      std::vector<std::int32_t> expected;
      for (std::int32_t d = 0; d < num_devices(); ++d)
        if (std::binary_search(base[d].begin(), base[d].end(), e)) expected.push_back(d);
      const auto& actual = placement.devices(b, e);
      if (actual == expected) continue;
      out << "\n[[override]]\nblock = " << b << "\nexpert = " << e << "\ndevices = [";
      for (std::size_t i = 0; i < actual.size(); ++i)
        out << (i ? ", " : "") << quote(devices[static_cast<std::size_t>(actual[i])].name);
      out << "]\n";
    }
  }
  out << "\n[policy]\nname = " << quote(policy.policy) << "\nscheduler = " << quote(policy.scheduler)
      << "\nlookahead = " << policy.lookahead << "\ndecay = " << format_double(policy.decay)
      << "\nmicrobatches = " << policy.microbatches << "\n";
  out << "\n[capacity]\nkv_pages_per_rank = " << capacity.kv_pages_per_rank << "\npage_size = " << capacity.page_size
      << "\nmax_batch = " << capacity.max_batch << "\n";
  return out.str();
}

Status validate_layout(const Layout& layout, const ModelConfig& config) {
  SY_RETURN_IF_ERROR(check_model(config));
  const Placement& p = layout.placement;
  if (p.num_blocks() != config.num_layers || p.num_experts() != config.num_experts)
    return Status::Error("placement covers " + std::to_string(p.num_blocks()) + " blocks x " +
                         std::to_string(p.num_experts()) + " experts, the model has " +
                         std::to_string(config.num_layers) + " x " + std::to_string(config.num_experts));
  for (std::int32_t b = 0; b < config.num_layers; ++b)
    if (p.is_sparse(b) != config.is_sparse(b))
      return Status::Error("placement says block " + std::to_string(b) + " is " + (p.is_sparse(b) ? "sparse" : "dense") +
                           ", the model disagrees");
  if (layout.devices.empty()) return Status::Error("the layout has no devices");
  std::int32_t rank = 0;
  for (std::int32_t d = 0; d < layout.num_devices(); ++d) {
    const DeviceSpec& dev = layout.devices[d];
    if (dev.name.empty() || has_control_chars(dev.name))
      return Status::Error("device " + std::to_string(d) + ": name must be non-empty text without control characters");
    if (layout.device_index(dev.name) != d) return Status::Error("duplicate device name '" + dev.name + "'");
    const std::int32_t want_rank = dev.attention ? rank++ : -1;
    if (dev.attention_rank != want_rank)
      return Status::Error("device '" + dev.name + "' has attention rank " + std::to_string(dev.attention_rank) +
                           ", expected " + std::to_string(want_rank) + " (ranks follow device order)");
    if (dev.holds_experts == p.experts_on(d).empty())
      return Status::Error("device '" + dev.name + "': holds_experts disagrees with the placement");
    if (!dev.attention && !dev.holds_experts)
      return Status::Error("device '" + dev.name + "' neither runs attention nor holds any expert");
  }
  if (rank == 0) return Status::Error("no device runs attention");
  SY_RETURN_IF_ERROR(p.validate(layout.num_devices()));
  Status s = validate_policy(layout.policy);
  if (!s.ok()) return s.with_context("policy");
  s = validate_capacity(layout.capacity);
  if (!s.ok()) return s.with_context("capacity");
  return Status::Ok();
}

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

namespace {

Layout make_layout(std::string name, std::int32_t attention_only, std::int32_t colocated, std::int32_t expert_only,
                   const ModelConfig& config) {
  Layout layout;
  layout.name = std::move(name);
  layout.placement = Placement(config);
  std::vector<std::int32_t> expert_devices;
  const std::int32_t total = attention_only + colocated + expert_only;
  std::int32_t rank = 0;
  for (std::int32_t d = 0; d < total; ++d) {
    DeviceSpec dev;
    dev.name = "gpu" + std::to_string(d);
    dev.attention = d < attention_only + colocated;
    dev.attention_rank = dev.attention ? rank++ : -1;
    if (d >= attention_only) expert_devices.push_back(d);
    layout.devices.push_back(std::move(dev));
  }
  bool any_sparse = false;
  for (std::int32_t b = 0; b < config.num_layers; ++b) {
    if (!config.is_sparse(b)) continue;
    any_sparse = true;
    for (std::int32_t e = 0; e < config.num_experts; ++e) {
      Status s = layout.placement.set(b, e, {expert_devices[static_cast<std::size_t>(e) % expert_devices.size()]});
      assert(s.ok());
      (void)s;
    }
  }
  for (std::int32_t d = 0; d < total; ++d)
    layout.devices[d].holds_experts = any_sparse && !layout.placement.experts_on(d).empty();
  return layout;
}

}  // namespace

Layout make_colocated_layout(std::int32_t devices, const ModelConfig& config) {
  assert(devices >= 1);
  Layout layout = make_layout(std::to_string(devices) + " colocated devices", 0, devices, 0, config);
  layout.policy.policy = "sync";
  return layout;
}

Layout make_disaggregated_layout(std::int32_t attention, std::int32_t expert, const ModelConfig& config,
                                 std::int32_t nodes) {
  assert(attention >= 1 && expert >= 1 && nodes >= 1 && attention % nodes == 0 && expert % nodes == 0);
  Layout layout = make_layout(std::to_string(attention) + " attention + " + std::to_string(expert) +
                                  " expert devices (disaggregated" +
                                  (nodes > 1 ? ", " + std::to_string(nodes) + " nodes)" : ")"),
                              attention, 0, expert, config);
  layout.policy.policy = "async";
  layout.policy.scheduler = "defrag";
  if (nodes == 1) return layout;
  // Node n holds attention devices [n·A/N, (n+1)·A/N) then expert devices likewise: put the
  // devices in that order, renaming them by position and remapping the placement.
  const std::int32_t a = attention / nodes, e = expert / nodes, total = attention + expert;
  std::vector<std::int32_t> new_index(static_cast<std::size_t>(total));
  for (std::int32_t d = 0; d < total; ++d) {
    const bool attn = d < attention;
    const std::int32_t i = attn ? d : d - attention;  // index within its kind
    const std::int32_t node = i / (attn ? a : e);
    new_index[static_cast<std::size_t>(d)] = node * (a + e) + (attn ? i % a : a + i % e);
  }
  std::vector<DeviceSpec> devices(static_cast<std::size_t>(total));
  for (std::int32_t d = 0; d < total; ++d) {
    DeviceSpec dev = layout.devices[static_cast<std::size_t>(d)];
    dev.name = "gpu" + std::to_string(new_index[static_cast<std::size_t>(d)]);
    devices[static_cast<std::size_t>(new_index[static_cast<std::size_t>(d)])] = std::move(dev);
  }
  layout.devices = std::move(devices);
  for (std::int32_t b = 0; b < config.num_layers; ++b) {
    if (!config.is_sparse(b)) continue;
    for (std::int32_t x = 0; x < config.num_experts; ++x) {
      std::vector<std::int32_t> moved;
      for (std::int32_t d : layout.placement.devices(b, x)) moved.push_back(new_index[static_cast<std::size_t>(d)]);
      Status s = layout.placement.set(b, x, std::move(moved));
      assert(s.ok());
      (void)s;
    }
  }
  return layout;
}

}  // namespace sy
