// bench_trace_codec: what a recording's span blocks would cost at other zstd levels and block
// sizes. Reads the spans of a recording, encodes each device's spans again as the recorder
// does (trace_block_codec) and prints bytes per span and spans encoded per second of one core.
//
//   build/bin/bench_trace_codec run.db [--levels 1,3,5,7] [--blocks 32768,131072]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "telemetry/trace_block_codec.h"
#include "telemetry/trace_reader.h"

namespace {

std::vector<long> numbers(const std::string& list) {
  std::vector<long> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::strtol(item.c_str(), nullptr, 10));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace sy::telemetry;
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_trace_codec RECORDING [--levels 1,3,5,7,9] [--blocks 32768,131072]\n");
    return 2;
  }
  std::vector<long> levels = {1, 3, 5, 7, 9}, blocks = {32768, 131072};
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--levels") {
      levels = numbers(argv[i + 1]);
    } else if (flag == "--blocks") {
      blocks = numbers(argv[i + 1]);
    } else {
      std::fprintf(stderr, "bench_trace_codec: unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  auto reader = TraceReader::open(argv[1]);
  if (!reader.ok()) {
    std::fprintf(stderr, "bench_trace_codec: %s\n", reader.status().message().c_str());
    return 1;
  }
  auto spans = (*reader)->spans();
  if (!spans.ok()) {
    std::fprintf(stderr, "bench_trace_codec: %s\n", spans.status().message().c_str());
    return 1;
  }
  // The recorder stores each transfer once, on its sender: receive-lane copies are derived.
  std::map<std::int32_t, std::vector<Span>> by_device;
  std::size_t total = 0;
  for (const Span& s : *spans) {
    if (s.lane == Lane::Receive) continue;
    by_device[s.device].push_back(s);
    ++total;
  }
  if (total == 0) {
    std::fprintf(stderr, "bench_trace_codec: %s holds no spans\n", argv[1]);
    return 1;
  }
  std::printf("%s: %zu spans over %zu devices\n", argv[1], total, by_device.size());
  std::printf("%6s %8s %12s %14s\n", "level", "block", "bytes/span", "M spans/s");
  for (long level : levels) {
    for (long block : blocks) {
      const auto b = static_cast<std::size_t>(std::max(1L, block));
      std::size_t bytes = 0;
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& [device, v] : by_device)
        for (std::size_t at = 0; at < v.size(); at += b)
          bytes += encode_span_block(device, std::span<const Span>(v.data() + at, std::min(b, v.size() - at)),
                                     BlockCodec::Zstd, static_cast<int>(level))
                       .data.size();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%6ld %8ld %12.3f %14.2f\n", level, block, static_cast<double>(bytes) / static_cast<double>(total),
                  static_cast<double>(total) / s * 1e-6);
    }
  }
  return 0;
}
