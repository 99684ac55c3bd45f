// Encodes spans and μ-queue samples of one device into compact blocks (columns of zigzag
// varints, timestamps as deltas, then zstd or LZ4): the storage unit of trace schema 2 and of
// the flight recorder's memory. docs/trace-schema.md describes the byte layout.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "telemetry/events.h"

namespace sy::telemetry {

// How a block's column bytes are compressed; the value is stored in the block row's `codec`.
enum class BlockCodec : std::uint8_t { None = 0, Zstd = 1, Lz4 = 2 };
std::string_view block_codec_name(BlockCodec codec);

// One encoded block: records of one device, with the bounds a reader selects blocks by.
struct EncodedBlock {
  std::int32_t device = 0;
  std::int64_t start_ns = 0;  // the earliest record's start (or timestamp)
  std::int64_t end_ns = 0;    // the latest record's end (or timestamp)
  std::uint32_t count = 0;
  std::uint32_t raw_bytes = 0;  // the column bytes before compression
  BlockCodec codec = BlockCodec::Zstd;
  std::string data;  // compressed column bytes
};

// `records` must all be of `device`; they are stored ordered by start (stable), which is the
// order decoding returns. `level` is zstd's level (LZ4 and None ignore it).
EncodedBlock encode_span_block(std::int32_t device, std::span<const Span> records, BlockCodec codec, int level = 3);
EncodedBlock encode_queue_block(std::int32_t device, std::span<const QueueSample> records, BlockCodec codec,
                                int level = 3);

// Appends the block's records to `out`. Errors: corrupt or truncated data, an unknown codec.
Status decode_span_block(std::int32_t device, std::int64_t start_ns, std::uint32_t count, BlockCodec codec,
                         std::string_view data, std::uint32_t raw_bytes, std::vector<Span>& out);
Status decode_queue_block(std::int32_t device, std::int64_t start_ns, std::uint32_t count, BlockCodec codec,
                          std::string_view data, std::uint32_t raw_bytes, std::vector<QueueSample>& out);

}  // namespace sy::telemetry
