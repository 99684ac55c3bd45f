// Fuzzes the trace's block decoders (docs/trace-schema.md), which read SPAN_BLOCKS and
// QUEUE_BLOCKS rows of a file someone hands the console or `switchyard trace`. Byte 0: bit 0
// queue samples (else spans), bits 1-2 the codec (3: one that does not exist), bit 3 the mode.
// Row mode: bytes 1-4 the row's count, 5-8 its raw size (little-endian), the rest its data, as
// a corrupt file would give them: records or a named error, never more records than the count,
// nothing allocated by a claim the bytes cannot back, and decoded records encode to a block
// that decodes to the same records. Record mode: the rest is records' bytes, encoded with the
// codec: they decode to exactly themselves, in start order.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "telemetry/trace_block_codec.h"
#include "tests/fuzz/fuzz_target.h"

namespace {

using namespace sy::telemetry;

std::uint32_t le32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8 |
         static_cast<std::uint32_t>(p[2]) << 16 | static_cast<std::uint32_t>(p[3]) << 24;
}

bool same(const Span& a, const Span& b) {
  return a.start_ns == b.start_ns && a.end_ns == b.end_ns && a.tokens == b.tokens && a.device == b.device &&
         a.block == b.block && a.index == b.index && a.microbatch == b.microbatch && a.peer == b.peer &&
         a.lane == b.lane && a.kind == b.kind && a.stall_reason == b.stall_reason;
}
bool same(const QueueSample& a, const QueueSample& b) {
  return a.t_ns == b.t_ns && a.depth_tokens == b.depth_tokens && a.oldest_age_ns == b.oldest_age_ns &&
         a.device == b.device && a.block == b.block && a.index == b.index && a.layer == b.layer;
}
std::int64_t start_of(const Span& s) { return s.start_ns; }
std::int64_t start_of(const QueueSample& q) { return q.t_ns; }

EncodedBlock encode_block(std::int32_t device, const std::vector<Span>& r, BlockCodec c) {
  return encode_span_block(device, r, c);
}
EncodedBlock encode_block(std::int32_t device, const std::vector<QueueSample>& r, BlockCodec c) {
  return encode_queue_block(device, r, c);
}
sy::Status decode_block(const EncodedBlock& b, std::int64_t start, std::uint32_t count, std::string_view data,
                        std::uint32_t raw, std::vector<Span>& out) {
  return decode_span_block(b.device, start, count, b.codec, data, raw, out);
}
sy::Status decode_block(const EncodedBlock& b, std::int64_t start, std::uint32_t count, std::string_view data,
                        std::uint32_t raw, std::vector<QueueSample>& out) {
  return decode_queue_block(b.device, start, count, b.codec, data, raw, out);
}

// `records` encode with `codec` to a block that decodes to them, stably sorted by start.
template <class T>
void round_trip(std::vector<T> records, BlockCodec codec, const char* what) {
  const EncodedBlock b = encode_block(3, records, codec);
  std::vector<T> back;
  if (const sy::Status s = decode_block(b, b.start_ns, b.count, b.data, b.raw_bytes, back); !s.ok())
    fuzz_fail("trace_block", (std::string(what) + ": its own encoding is refused: " + s.message()).c_str());
  std::stable_sort(records.begin(), records.end(), [](const T& x, const T& y) { return start_of(x) < start_of(y); });
  if (back.size() != records.size()) fuzz_fail("trace_block", (std::string(what) + ": a record lost").c_str());
  for (std::size_t i = 0; i < back.size(); ++i) {
    records[i].device = 3;
    if (!same(back[i], records[i])) fuzz_fail("trace_block", (std::string(what) + ": reads back different").c_str());
  }
}

template <class T>
void row(BlockCodec codec, const std::uint8_t* data, std::size_t size) {
  if (size < 8) return;
  const std::uint32_t count = le32(data), raw = le32(data + 4);
  const std::string_view bytes(reinterpret_cast<const char*>(data + 8), size - 8);
  EncodedBlock b;
  b.device = 1;
  b.codec = codec;
  std::vector<T> out;
  const sy::Status s = decode_block(b, 1'000, count, bytes, raw, out);
  if (!s.ok()) {
    if (s.message().empty()) fuzz_fail("trace_block", "an error without a message");
    if (!out.empty()) fuzz_fail("trace_block", "records left behind by a refused block");
    return;
  }
  if (out.size() != count) fuzz_fail("trace_block", "a block decoded to another number of records than its count");
  round_trip(std::move(out), codec, "decoded records");
}

template <class T>
void records(BlockCodec codec, const std::uint8_t* data, std::size_t size) {
  std::vector<T> r(size / sizeof(T));
  if (!r.empty()) std::memcpy(r.data(), data, r.size() * sizeof(T));
  round_trip(std::move(r), codec, "records");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const bool queues = (data[0] & 1) != 0;
  const auto codec = static_cast<BlockCodec>((data[0] >> 1) & 3);
  const bool record_mode = (data[0] & 8) != 0;
  ++data;
  --size;
  if (record_mode) {
    if (static_cast<int>(codec) == 3) return 0;  // only real codecs encode
    if (queues)
      records<QueueSample>(codec, data, size);
    else
      records<Span>(codec, data, size);
  } else if (queues) {
    row<QueueSample>(codec, data, size);
  } else {
    row<Span>(codec, data, size);
  }
  return 0;
}
