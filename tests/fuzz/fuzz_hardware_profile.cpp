// Fuzzes hardware-profile TOML parsing: any text gives a profile or a named error.
#include <string>

#include "engine/sim/hardware_profile.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto profile = sy::parse_hardware_profile(text, "fuzz.toml");
  if (!profile.ok() && profile.status().message().empty()) fuzz_fail("hardware_profile", "an error without a message");
  return 0;
}
