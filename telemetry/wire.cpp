#include "telemetry/wire.h"

#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace sy::telemetry {

std::string_view topic_name(Topic topic) {
  switch (topic) {
    case Topic::Spans: return "spans";
    case Topic::Queues: return "queues";
    case Topic::ExpertLoad: return "expert_load";
    case Topic::Requests: return "requests";
    case Topic::Control: return "control";
    case Topic::Summary: return "summary";
    case Topic::Meta: return "meta";
  }
  return "unknown";
}

std::optional<Topic> parse_topic(std::string_view name) {
  for (Topic t : kAllTopics) {
    if (topic_name(t) == name) return t;
  }
  return std::nullopt;
}

bool topic_is_json(Topic topic) {
  return topic == Topic::Control || topic == Topic::Summary || topic == Topic::Meta;
}

std::uint16_t record_size(Topic topic) {
  switch (topic) {
    case Topic::Spans: return sizeof(Span);
    case Topic::Queues: return sizeof(QueueSample);
    case Topic::ExpertLoad: return sizeof(ExpertLoad);
    case Topic::Requests: return sizeof(RequestEvent);
    case Topic::Control:
    case Topic::Summary:
    case Topic::Meta: return 0;
  }
  return 0;
}

namespace {

std::string header_bytes(const BatchHeader& h) {
  std::string out(sizeof(BatchHeader), '\0');
  std::memcpy(out.data(), &h, sizeof h);  // the struct has no padding and the host is little-endian
  return out;
}

template <class T>
std::vector<T> copy_records(std::string_view payload, std::uint32_t count) {
  std::vector<T> out(count);
  if (count != 0) std::memcpy(out.data(), payload.data(), std::size_t{count} * sizeof(T));
  return out;
}

}  // namespace

EncodedBatch encode(Topic topic, std::uint64_t sequence, std::uint64_t run_id, const void* records,
                    std::uint32_t count) {
  BatchHeader h;
  h.record_size = record_size(topic);
  h.record_count = count;
  h.sequence = sequence;
  h.run_id = run_id;
  EncodedBatch out;
  out.topic = std::string(topic_name(topic));
  out.header = header_bytes(h);
  out.payload.assign(static_cast<const char*>(records), std::size_t{count} * h.record_size);
  return out;
}

EncodedBatch encode_json(Topic topic, std::uint64_t sequence, std::uint64_t run_id, std::string json_array,
                         std::uint32_t count) {
  BatchHeader h;
  h.record_size = 0;
  h.record_count = count;
  h.sequence = sequence;
  h.run_id = run_id;
  EncodedBatch out;
  out.topic = std::string(topic_name(topic));
  out.header = header_bytes(h);
  out.payload = std::move(json_array);
  return out;
}

StatusOr<Batch> decode(std::string_view topic, std::string_view header, std::string_view payload) {
  const std::optional<Topic> parsed = parse_topic(topic);
  if (!parsed) {
    return Status::Error("unknown topic '" + std::string(topic.substr(0, 64)) + "'");
  }
  Batch batch;
  batch.topic = *parsed;
  const std::string name(topic);
  if (header.size() != sizeof(BatchHeader)) {
    return Status::Error(name + ": header is " + std::to_string(header.size()) + " bytes, expected " +
                         std::to_string(sizeof(BatchHeader)));
  }
  std::memcpy(&batch.header, header.data(), sizeof(BatchHeader));
  const BatchHeader& h = batch.header;
  if (h.magic != kMagic) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "0x%08x", h.magic);
    return Status::Error(name + ": bad magic " + buf + " (expected 0x31545953, \"SYT1\")");
  }
  if (h.schema_version == 0 || h.schema_version > kSchemaVersion) {
    return Status::Error(name + ": schema version " + std::to_string(h.schema_version) +
                         " is not supported (this decoder knows versions 1 to " + std::to_string(kSchemaVersion) +
                         ")");
  }
  const std::uint16_t want = record_size(batch.topic);
  if (h.record_size != want) {
    return Status::Error(name + ": record size " + std::to_string(h.record_size) + " does not match the topic's " +
                         std::to_string(want));
  }
  if (topic_is_json(batch.topic)) {
    nlohmann::json doc = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) return Status::Error(name + ": payload is not valid JSON");
    if (!doc.is_array()) return Status::Error(name + ": payload is not a JSON array");
    if (doc.size() != h.record_count) {
      return Status::Error(name + ": payload holds " + std::to_string(doc.size()) + " objects, header says " +
                           std::to_string(h.record_count));
    }
    for (const auto& item : doc) {
      if (!item.is_object()) return Status::Error(name + ": payload array holds a non-object element");
    }
    batch.json = std::string(payload);
    return batch;
  }
  const std::uint64_t expected = std::uint64_t{h.record_count} * want;
  if (payload.size() != expected) {
    return Status::Error(name + ": payload is " + std::to_string(payload.size()) + " bytes, expected " +
                         std::to_string(h.record_count) + " records x " + std::to_string(want) + " = " +
                         std::to_string(expected));
  }
  switch (batch.topic) {
    case Topic::Spans: batch.spans = copy_records<Span>(payload, h.record_count); break;
    case Topic::Queues: batch.queues = copy_records<QueueSample>(payload, h.record_count); break;
    case Topic::ExpertLoad: batch.loads = copy_records<ExpertLoad>(payload, h.record_count); break;
    case Topic::Requests: batch.requests = copy_records<RequestEvent>(payload, h.record_count); break;
    default: break;
  }
  return batch;
}

}  // namespace sy::telemetry
