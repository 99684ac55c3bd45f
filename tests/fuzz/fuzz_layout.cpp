// Fuzzes layout TOML parsing against a small model: any text gives a layout or a named error;
// a layout it accepts is valid, makes a topology, and writes back to TOML that reads back equal.
#include <string>

#include "engine/model/random_model.h"
#include "engine/runtime/layout.h"
#include "engine/runtime/layout_parser.h"
#include "engine/runtime/topology.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

sy::ModelConfig fuzz_model() {
  sy::ModelConfig c = sy::preset_config(sy::Arch::Mixtral, sy::ModelPreset::Tiny, sy::kernels::DType::F32);
  c.num_layers = 3;
  c.sparse_layers = {true, false, true};
  c.num_experts = 4;
  c.top_k = 2;
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const sy::ModelConfig config = fuzz_model();
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto layout = sy::parse_layout(text, "fuzz.toml", config);
  if (!layout.ok()) {
    if (layout.status().message().empty()) fuzz_fail("layout", "an error without a message");
    return 0;
  }
  if (auto valid = sy::validate_layout(*layout, config); !valid.ok())
    fuzz_fail("layout", ("the parser accepted an invalid layout: " + valid.message()).c_str());
  const sy::Topology topology = sy::Topology::from_layout(*layout, config);
  if (topology.num_devices != layout->num_devices()) fuzz_fail("layout", "the topology lost devices");
  auto back = sy::parse_layout(layout->to_toml(), "written.toml", config);
  if (!back.ok()) fuzz_fail("layout", ("its own TOML is refused: " + back.status().message()).c_str());
  if (!(*back == *layout)) fuzz_fail("layout", "to_toml() does not read back equal");
  return 0;
}
