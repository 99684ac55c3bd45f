// The telemetry stream's message format: one ZeroMQ multipart message per batch of records of
// one topic — [topic][32-byte header][payload] — versioned, so a client written from
// docs/telemetry-protocol.md alone can decode it (tools/telemetry/subscribe.py does).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/events.h"
#include "base/status.h"

namespace sy::telemetry {

inline constexpr std::uint16_t kSchemaVersion = 1;
inline constexpr std::uint32_t kMagic = 0x31545953;  // "SYT1" little-endian

// One topic per event kind. Binary topics carry fixed-size records; JSON topics carry a JSON
// array of objects (low-rate, rich: control events, window summaries, run metadata).
enum class Topic : std::uint8_t { Spans, Queues, ExpertLoad, Requests, Control, Summary, Meta };
inline constexpr Topic kAllTopics[] = {Topic::Spans,   Topic::Queues,  Topic::ExpertLoad, Topic::Requests,
                                       Topic::Control, Topic::Summary, Topic::Meta};

// "spans", "queues", "expert_load", "requests", "control", "summary", "meta".
std::string_view topic_name(Topic topic);
std::optional<Topic> parse_topic(std::string_view name);
bool topic_is_json(Topic topic);
// Record size of a binary topic; 0 for JSON topics.
std::uint16_t record_size(Topic topic);

// Second frame of every message, 32 bytes little-endian.
struct BatchHeader {
  std::uint32_t magic = kMagic;
  std::uint16_t schema_version = kSchemaVersion;
  std::uint16_t record_size = 0;   // bytes per record; 0 for JSON topics
  std::uint32_t record_count = 0;  // records in the payload (JSON: objects in the array)
  std::uint32_t flags = 0;         // reserved, 0
  std::uint64_t sequence = 0;      // per topic, from 0: a gap means the subscriber lost messages
  std::uint64_t run_id = 0;        // changes when the engine restarts
};
static_assert(sizeof(BatchHeader) == 32);

// A decoded message: the header and the records of its topic (only the matching vector filled).
struct Batch {
  Topic topic = Topic::Spans;
  BatchHeader header;
  std::vector<Span> spans;
  std::vector<QueueSample> queues;
  std::vector<ExpertLoad> loads;
  std::vector<RequestEvent> requests;
  std::string json;  // JSON topics: the payload, a JSON array
};

// The three frames of one message.
struct EncodedBatch {
  std::string topic;
  std::string header;   // 32 bytes
  std::string payload;
};

EncodedBatch encode(Topic topic, std::uint64_t sequence, std::uint64_t run_id, const void* records,
                    std::uint32_t count);
EncodedBatch encode_json(Topic topic, std::uint64_t sequence, std::uint64_t run_id, std::string json_array,
                         std::uint32_t count);
// Validates magic, version, sizes and counts against the topic; the error names the problem.
StatusOr<Batch> decode(std::string_view topic, std::string_view header, std::string_view payload);

}  // namespace sy::telemetry
