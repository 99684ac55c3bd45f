#include "telemetry/trace_block_codec.h"

#include <algorithm>
#include <array>
#include <memory>
#include <numeric>
#include <unordered_map>

#include <lz4.h>
#include <zstd.h>

namespace sy::telemetry {

namespace {

std::uint64_t zigzag(std::int64_t v) {
  return (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
}
std::int64_t unzigzag(std::uint64_t v) { return static_cast<std::int64_t>(v >> 1) ^ -static_cast<std::int64_t>(v & 1); }

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

// Reads the column bytes in order; any overrun or overlong varint marks the reader failed.
class ColumnReader {
 public:
  explicit ColumnReader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}
  std::int64_t sint() { return unzigzag(uint()); }
  std::uint64_t uint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ == end_) return fail();
      const auto b = static_cast<std::uint8_t>(*p_++);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    return fail();
  }
  std::uint8_t byte() {
    if (p_ == end_) return static_cast<std::uint8_t>(fail());
    return static_cast<std::uint8_t>(*p_++);
  }
  bool ok() const { return ok_; }
  bool at_end() const { return p_ == end_; }

 private:
  std::uint64_t fail() {
    ok_ = false;
    p_ = end_;
    return 0;
  }
  const char* p_;
  const char* end_;
  bool ok_ = true;
};

std::string compress(BlockCodec codec, const std::string& raw, int level) {
  switch (codec) {
    case BlockCodec::None:
      return raw;
    case BlockCodec::Zstd: {
      // One context per thread: the writer compresses block after block.
      thread_local std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> ctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
      std::string out(ZSTD_compressBound(raw.size()), '\0');
      const std::size_t n = ZSTD_compressCCtx(ctx.get(), out.data(), out.size(), raw.data(), raw.size(), level);
      if (ZSTD_isError(n)) return {};
      out.resize(n);
      return out;
    }
    case BlockCodec::Lz4: {
      std::string out(static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(raw.size()))), '\0');
      const int n = LZ4_compress_default(raw.data(), out.data(), static_cast<int>(raw.size()), static_cast<int>(out.size()));
      out.resize(static_cast<std::size_t>(std::max(n, 0)));
      return out;
    }
  }
  return {};
}

// A block's records take at most this many column bytes each (ten varints and three bytes),
// and at least one byte per column: a span has three bytes and seven varints, a queue sample
// five varints and a byte. The count of a block read from a file is checked against its size
// before anything is sized by it: a corrupt row must not make the reader allocate gigabytes.
constexpr std::uint64_t kMaxRawBytesPerRecord = 10 * 10 + 3;
constexpr std::uint64_t kMinSpanBytes = 3 + 7;
constexpr std::uint64_t kMinQueueSampleBytes = 5 + 1;
// LZ4's format cannot expand one input byte into more than 255 output bytes (a run's length
// grows by 255 per extra length byte): a larger claimed size is corrupt, found before sizing.
constexpr std::uint64_t kMaxLz4Ratio = 255;

// zstd into a buffer that grows with what the frame really yields (at most raw_bytes), so a
// frame that claims more than it holds costs no more memory than it decompresses to.
StatusOr<std::string> unzstd(std::string_view data, std::uint32_t raw_bytes) {
  const unsigned long long declared = ZSTD_getFrameContentSize(data.data(), data.size());
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != raw_bytes) return Status::Error("corrupt zstd block");
  thread_local std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  ZSTD_DCtx_reset(ctx.get(), ZSTD_reset_session_only);
  std::string raw;
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  std::size_t done = 0;
  // One byte of room past the claim, so that a frame yielding more than it should is seen.
  const std::size_t cap = std::size_t{raw_bytes} + 1;
  while (true) {
    if (done == raw.size()) {
      if (raw.size() == cap) return Status::Error("corrupt zstd block");
      raw.resize(std::min(cap, std::max<std::size_t>(raw.size() * 2, std::size_t{1} << 16)));
    }
    ZSTD_outBuffer out{raw.data(), raw.size(), done};
    const std::size_t left = ZSTD_decompressStream(ctx.get(), &out, &in);
    if (ZSTD_isError(left)) return Status::Error("corrupt zstd block");
    done = out.pos;
    if (left == 0) {  // the frame is whole: it must be all the data and yield the claimed size
      if (done != raw_bytes || in.pos != in.size) return Status::Error("corrupt zstd block");
      raw.resize(done);
      return raw;
    }
    if (in.pos == in.size && done < raw.size()) return Status::Error("corrupt zstd block");  // truncated
  }
}

StatusOr<std::string> decompress(BlockCodec codec, std::string_view data, std::uint32_t raw_bytes, std::uint32_t count,
                                 std::uint64_t min_bytes_per_record) {
  if (raw_bytes > static_cast<std::uint64_t>(count) * kMaxRawBytesPerRecord ||
      raw_bytes < static_cast<std::uint64_t>(count) * min_bytes_per_record)
    return Status::Error("block claims " + std::to_string(raw_bytes) + " bytes for " + std::to_string(count) + " records");
  switch (codec) {
    case BlockCodec::None:
      if (data.size() != raw_bytes) return Status::Error("block size does not match its raw size");
      return std::string(data);
    case BlockCodec::Zstd:
      return unzstd(data, raw_bytes);
    case BlockCodec::Lz4: {
      if (raw_bytes > data.size() * kMaxLz4Ratio || data.size() > static_cast<std::size_t>(INT32_MAX))
        return Status::Error("corrupt LZ4 block");
      std::string raw(raw_bytes, '\0');
      const int n = LZ4_decompress_safe(data.data(), raw.data(), static_cast<int>(data.size()), static_cast<int>(raw.size()));
      if (n < 0 || static_cast<std::uint32_t>(n) != raw_bytes) return Status::Error("corrupt LZ4 block");
      return raw;
    }
  }
  return Status::Error("unknown block codec " + std::to_string(static_cast<int>(codec)));
}

// Timestamps are coded as differences and summed back in two's complement, so that any bytes
// decode without signed overflow and any records (however far apart) round-trip exactly.
std::int64_t wrapping_add(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) + static_cast<std::uint64_t>(b));
}
std::int64_t wrapping_sub(std::int64_t a, std::int64_t b) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(b));
}

template <class T, class StartFn>
std::vector<std::uint32_t> order_by(std::span<const T> records, StartFn start) {
  std::vector<std::uint32_t> order(records.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return start(records[a]) < start(records[b]); });
  return order;
}

EncodedBlock finish(std::int32_t device, std::int64_t start, std::int64_t end, std::size_t count, const std::string& raw,
                    BlockCodec codec, int level) {
  EncodedBlock b;
  b.device = device;
  b.start_ns = start;
  b.end_ns = end;
  b.count = static_cast<std::uint32_t>(count);
  b.raw_bytes = static_cast<std::uint32_t>(raw.size());
  b.codec = codec;
  b.data = compress(codec, raw, level);
  if (b.data.empty() && !raw.empty()) {  // a compressor failure keeps the bytes rather than losing them
    b.codec = BlockCodec::None;
    b.data = raw;
  }
  return b;
}

}  // namespace

std::string_view block_codec_name(BlockCodec codec) {
  switch (codec) {
    case BlockCodec::None: return "none";
    case BlockCodec::Zstd: return "zstd";
    case BlockCodec::Lz4: return "lz4";
  }
  return "unknown";
}

// A span's duration is coded as the difference to the previous span of the same kind and
// token count: the same work on the same rows takes about as long each time.
std::uint64_t duration_context(const Span& s) {
  return (static_cast<std::uint64_t>(s.kind) << 56) ^ static_cast<std::uint64_t>(s.tokens);
}

EncodedBlock encode_span_block(std::int32_t device, std::span<const Span> records, BlockCodec codec, int level) {
  const auto order = order_by(records, [](const Span& s) { return s.start_ns; });
  std::int64_t start = records.empty() ? 0 : records[order.front()].start_ns;
  std::int64_t end = start;
  std::string raw;
  raw.reserve(records.size() * 16);
  // Column after column: each column's values are alike, which is what the compressor finds.
  for (std::uint32_t i : order) raw.push_back(static_cast<char>(records[i].lane));
  for (std::uint32_t i : order) raw.push_back(static_cast<char>(records[i].kind));
  for (std::uint32_t i : order) raw.push_back(static_cast<char>(records[i].stall_reason));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].tokens));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].block));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].index));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].microbatch));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].peer));
  // A start is coded as the gap after the previous span of its lane ended: a compute lane is
  // covered by executions and stalls end to end, so its gaps are almost all zero.
  std::array<std::int64_t, 256> lane_end;
  lane_end.fill(start);
  for (std::uint32_t i : order) {
    const auto lane = static_cast<std::uint8_t>(records[i].lane);
    put_varint(raw, zigzag(wrapping_sub(records[i].start_ns, lane_end[lane])));
    lane_end[lane] = records[i].end_ns;
    end = std::max(end, records[i].end_ns);
  }
  std::unordered_map<std::uint64_t, std::int64_t> last_duration;
  for (std::uint32_t i : order) {
    const std::int64_t d = wrapping_sub(records[i].end_ns, records[i].start_ns);
    std::int64_t& last = last_duration[duration_context(records[i])];
    put_varint(raw, zigzag(wrapping_sub(d, last)));
    last = d;
  }
  return finish(device, start, end, records.size(), raw, codec, level);
}

EncodedBlock encode_queue_block(std::int32_t device, std::span<const QueueSample> records, BlockCodec codec, int level) {
  const auto order = order_by(records, [](const QueueSample& q) { return q.t_ns; });
  const std::int64_t start = records.empty() ? 0 : records[order.front()].t_ns;
  const std::int64_t end = records.empty() ? 0 : records[order.back()].t_ns;
  std::string raw;
  raw.reserve(records.size() * 12);
  std::int64_t prev = start;
  for (std::uint32_t i : order) {
    put_varint(raw, zigzag(wrapping_sub(records[i].t_ns, prev)));
    prev = records[i].t_ns;
  }
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].depth_tokens));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].oldest_age_ns));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].block));
  for (std::uint32_t i : order) put_varint(raw, zigzag(records[i].index));
  for (std::uint32_t i : order) raw.push_back(static_cast<char>(records[i].layer));
  return finish(device, start, end, records.size(), raw, codec, level);
}

Status decode_span_block(std::int32_t device, std::int64_t start_ns, std::uint32_t count, BlockCodec codec,
                         std::string_view data, std::uint32_t raw_bytes, std::vector<Span>& out) {
  auto raw = decompress(codec, data, raw_bytes, count, kMinSpanBytes);
  if (!raw.ok()) return raw.status();
  ColumnReader r(*raw);
  const std::size_t base = out.size();
  out.resize(base + count);
  std::span<Span> s(out.data() + base, count);
  for (Span& x : s) {
    x.device = device;
    x.lane = static_cast<Lane>(r.byte());
  }
  for (Span& x : s) x.kind = static_cast<SpanKind>(r.byte());
  for (Span& x : s) x.stall_reason = static_cast<StallReason>(r.byte());
  for (Span& x : s) x.tokens = r.sint();
  for (Span& x : s) x.block = static_cast<std::int32_t>(r.sint());
  for (Span& x : s) x.index = static_cast<std::int32_t>(r.sint());
  for (Span& x : s) x.microbatch = static_cast<std::int32_t>(r.sint());
  for (Span& x : s) x.peer = static_cast<std::int32_t>(r.sint());
  std::array<std::int64_t, 256> lane_end;
  lane_end.fill(start_ns);
  std::vector<std::int64_t> gaps(count);
  for (std::int64_t& g : gaps) g = r.sint();
  std::unordered_map<std::uint64_t, std::int64_t> last_duration;
  for (std::size_t i = 0; i < s.size(); ++i) {
    Span& x = s[i];
    std::int64_t& last = last_duration[duration_context(x)];
    const std::int64_t d = wrapping_add(last, r.sint());
    last = d;
    std::int64_t& end = lane_end[static_cast<std::uint8_t>(x.lane)];
    x.start_ns = wrapping_add(end, gaps[i]);
    x.end_ns = wrapping_add(x.start_ns, d);
    end = x.end_ns;
  }
  if (!r.ok() || !r.at_end()) {
    out.resize(base);
    return Status::Error("span block of " + std::to_string(count) + " records is corrupt");
  }
  return Status::Ok();
}

Status decode_queue_block(std::int32_t device, std::int64_t start_ns, std::uint32_t count, BlockCodec codec,
                          std::string_view data, std::uint32_t raw_bytes, std::vector<QueueSample>& out) {
  auto raw = decompress(codec, data, raw_bytes, count, kMinQueueSampleBytes);
  if (!raw.ok()) return raw.status();
  ColumnReader r(*raw);
  const std::size_t base = out.size();
  out.resize(base + count);
  std::span<QueueSample> s(out.data() + base, count);
  std::int64_t t = start_ns;
  for (QueueSample& x : s) {
    t = wrapping_add(t, r.sint());
    x.t_ns = t;
    x.device = device;
  }
  for (QueueSample& x : s) x.depth_tokens = r.sint();
  for (QueueSample& x : s) x.oldest_age_ns = r.sint();
  for (QueueSample& x : s) x.block = static_cast<std::int32_t>(r.sint());
  for (QueueSample& x : s) x.index = static_cast<std::int32_t>(r.sint());
  for (QueueSample& x : s) x.layer = static_cast<LayerKind>(r.byte());
  if (!r.ok() || !r.at_end()) {
    out.resize(base);
    return Status::Error("queue block of " + std::to_string(count) + " records is corrupt");
  }
  return Status::Ok();
}

}  // namespace sy::telemetry
