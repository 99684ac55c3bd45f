// Fuzzes config.json parsing: any text gives a config or a named error, and a config it
// accepts writes back to a config.json that reads back to the same text.
#include <string>

#include "engine/model/model_config.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = sy::ModelConfig::from_json(text, "config.json");
  if (!config.ok()) {
    if (config.status().message().empty()) fuzz_fail("model_config", "an error without a message");
    return 0;
  }
  const std::string written = config->to_json();
  auto back = sy::ModelConfig::from_json(written, "written config.json");
  if (!back.ok()) fuzz_fail("model_config", ("its own config.json is refused: " + back.status().message()).c_str());
  if (back->to_json() != written) fuzz_fail("model_config", "config.json does not read back unchanged");
  return 0;
}
