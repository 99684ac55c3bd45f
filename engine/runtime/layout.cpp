#include "engine/runtime/layout.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <sstream>
#include <utility>

#include "engine/runtime/config_text.h"

namespace sy {
namespace {

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

std::string format_int_list(const std::vector<std::int32_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

}  // namespace

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
    if (devices[d].process >= 0) out << "rank = " << devices[d].process << "\n";
    if (devices[d].memory_gb > 0) out << "memory_gb = " << format_double(devices[d].memory_gb) << "\n";
    if (devices[d].gpu >= 0) out << "gpu = " << devices[d].gpu << "\n";
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
      << "\nmicrobatches = " << policy.microbatches << "\nexpert_chunks = " << policy.expert_chunks
      << "\norder = " << quote(policy.order)
      << "\nbarrier = " << quote(policy.barrier) << "\ngate = " << quote(policy.gate)
      << "\nadaptive_pingpong_from = " << format_double(policy.adaptive_pingpong_from)
      << "\nadaptive_async_from = " << format_double(policy.adaptive_async_from) << "\n";
  out << "\n[capacity]\nkv_pages_per_rank = " << capacity.kv_pages_per_rank << "\npage_size = " << capacity.page_size
      << "\nmax_batch = " << capacity.max_batch << "\n";
  return out.str();
}

bool valid_device_name(std::string_view name) {
  return !name.empty() && std::none_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

Status check_model_for_layout(const ModelConfig& config) {
  if (config.num_layers < 0 || config.num_experts < 0 ||
      config.sparse_layers.size() != static_cast<std::size_t>(config.num_layers))
    return Status::Error("model config: sparse_layers has " + std::to_string(config.sparse_layers.size()) +
                         " entries for " + std::to_string(config.num_layers) + " layers");
  return Status::Ok();
}

Status validate_layout(const Layout& layout, const ModelConfig& config) {
  SY_RETURN_IF_ERROR(check_model_for_layout(config));
  const Placement& p = layout.placement;
  SY_RETURN_IF_ERROR(p.check_shape(config.num_experts, config.sparse_layers));
  if (layout.devices.empty()) return Status::Error("the layout has no devices");
  std::int32_t rank = 0;
  const auto experts = p.experts_by_device(layout.num_devices());
  for (std::int32_t d = 0; d < layout.num_devices(); ++d) {
    const DeviceSpec& dev = layout.devices[d];
    if (!valid_device_name(dev.name))
      return Status::Error("device " + std::to_string(d) + ": name must be non-empty text without control characters");
    if (layout.device_index(dev.name) != d) return Status::Error("duplicate device name '" + dev.name + "'");
    const std::int32_t want_rank = dev.attention ? rank++ : -1;
    if (dev.attention_rank != want_rank)
      return Status::Error("device '" + dev.name + "' has attention rank " + std::to_string(dev.attention_rank) +
                           ", expected " + std::to_string(want_rank) + " (ranks follow device order)");
    if (dev.holds_experts == experts[static_cast<std::size_t>(d)].empty())
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
  const auto experts = layout.placement.experts_by_device(total);
  for (std::int32_t d = 0; d < total; ++d)
    layout.devices[d].holds_experts = any_sparse && !experts[static_cast<std::size_t>(d)].empty();
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
