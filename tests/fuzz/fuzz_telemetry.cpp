// Fuzzes the decoder of the telemetry stream (docs/telemetry-protocol.md): the console decodes
// every message an engine publishes, possibly from another machine. Byte 0 picks the topic
// frame (one of the seven topics, or the next bytes up to a NUL as an unknown name), bytes 1-32
// are the header frame, the rest the payload frame. A message decodes or gives a named error; a
// decoded message encodes again to the same payload and decodes to the same records.
#include <cstring>
#include <string>
#include <string_view>

#include "telemetry/wire.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sy::telemetry;

const void* records_of(const Batch& b) {
  switch (b.topic) {
    case Topic::Spans: return b.spans.data();
    case Topic::Queues: return b.queues.data();
    case Topic::ExpertLoad: return b.loads.data();
    case Topic::Requests: return b.requests.data();
    default: return nullptr;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t pick = data[0] % 8;
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string topic;
  if (pick < 7) {
    topic = std::string(topic_name(kAllTopics[pick]));
  } else {
    const std::size_t nul = rest.find('\0');
    topic = std::string(rest.substr(0, nul));
    rest.remove_prefix(nul == std::string_view::npos ? rest.size() : nul + 1);
  }
  const std::string_view header = rest.substr(0, std::min<std::size_t>(rest.size(), sizeof(BatchHeader)));
  const std::string_view payload = rest.substr(header.size());
  const auto got = decode(topic, header, payload);
  if (!got.ok()) {
    if (got.status().message().empty()) fuzz_fail("telemetry", "an error without a message");
    return 0;
  }
  const Batch& b = *got;
  if (std::string(topic_name(b.topic)) != topic) fuzz_fail("telemetry", "decoded under another topic");
  const EncodedBatch again =
      topic_is_json(b.topic)
          ? encode_json(b.topic, b.header.sequence, b.header.run_id, b.json, b.header.record_count)
          : encode(b.topic, b.header.sequence, b.header.run_id, records_of(b), b.header.record_count);
  if (again.payload != payload) fuzz_fail("telemetry", "a decoded message encodes to another payload");
  const auto back = decode(again.topic, again.header, again.payload);
  if (!back.ok()) fuzz_fail("telemetry", ("its own encoding is refused: " + back.status().message()).c_str());
  const Batch& c = *back;
  if (c.header.sequence != b.header.sequence || c.header.run_id != b.header.run_id ||
      c.header.record_count != b.header.record_count || c.json != b.json || c.spans.size() != b.spans.size() ||
      c.queues.size() != b.queues.size() || c.loads.size() != b.loads.size() || c.requests.size() != b.requests.size())
    fuzz_fail("telemetry", "reads back different");
  return 0;
}
