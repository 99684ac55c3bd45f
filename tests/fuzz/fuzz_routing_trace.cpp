// Fuzzes routing-trace parsing (docs/routing-trace.md): any text gives a trace or a named
// error, without allocating beyond the shape's bounds, and an accepted trace writes a file that
// reads back with the same shape and records.
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "engine/sim/routing_trace.h"
#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  auto trace = sy::RoutingTrace::parse(in, "fuzz.trace");
  if (!trace.ok()) {
    if (trace.status().message().empty()) fuzz_fail("routing_trace", "an error without a message");
    return 0;
  }
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("sy_fuzz_routing_" + std::to_string(::getpid()) + ".trace");
  if (auto w = trace->write(file); !w.ok()) fuzz_fail("routing_trace", ("cannot write it back: " + w.message()).c_str());
  auto back = sy::RoutingTrace::load(file);
  if (!back.ok()) fuzz_fail("routing_trace", ("its own file is refused: " + back.status().message()).c_str());
  if (back->size() != trace->size() || back->shape().num_layers != trace->shape().num_layers ||
      back->shape().num_experts != trace->shape().num_experts || back->shape().top_k != trace->shape().top_k)
    fuzz_fail("routing_trace", "the written trace reads back different");
  return 0;
}
