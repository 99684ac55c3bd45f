// Fuzzes the safetensors parser on raw file images: any bytes give tensors or a named error,
// and every tensor it accepts lies inside the image with exactly its shape's bytes.
#include <string>

#include "engine/model/safetensors.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto tensors = sy::parse_safetensors(data, size, "fuzz.safetensors");
  if (!tensors.ok()) {
    if (tensors.status().message().empty()) fuzz_fail("safetensors", "an error without a message");
    return 0;
  }
  const auto* end = data + size;
  for (const auto& [name, t] : *tensors) {
    const auto* begin = static_cast<const std::uint8_t*>(t.data);
    if (begin < data + 8 || begin > end || t.nbytes > static_cast<std::size_t>(end - begin))
      fuzz_fail("safetensors", ("tensor '" + name + "' lies outside the image").c_str());
    std::size_t n = t.element_size;
    for (std::int64_t d : t.shape) n *= static_cast<std::size_t>(d);
    if (n != t.nbytes) fuzz_fail("safetensors", ("tensor '" + name + "' size differs from its shape").c_str());
  }
  return 0;
}
