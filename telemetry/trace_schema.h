// The SQLite trace schema shared by the recorder and the reader (docs/trace-schema.md is the
// public description; keep both in step and bump kTraceSchemaVersion on any change).
#pragma once

#include <cstdint>

namespace sy::telemetry::trace_schema {

inline constexpr int kVersion = 1;                  // PRAGMA user_version
inline constexpr std::int32_t kApplicationId = 0x53595452;  // PRAGMA application_id, "SYTR"

inline constexpr const char* kCreateTables = R"sql(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);
CREATE TABLE META (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE DEVICES (device INTEGER PRIMARY KEY, nameId INTEGER NOT NULL REFERENCES StringIds(id));
CREATE TABLE SPANS (
  start INTEGER NOT NULL, end INTEGER NOT NULL, device INTEGER NOT NULL,
  laneId INTEGER NOT NULL REFERENCES StringIds(id), kindId INTEGER NOT NULL REFERENCES StringIds(id),
  stallReasonId INTEGER REFERENCES StringIds(id),
  block INTEGER NOT NULL, idx INTEGER NOT NULL, microbatch INTEGER NOT NULL, peer INTEGER NOT NULL,
  tokens INTEGER NOT NULL);
CREATE TABLE QUEUE_SAMPLES (
  timestamp INTEGER NOT NULL, device INTEGER NOT NULL, layerKindId INTEGER NOT NULL REFERENCES StringIds(id),
  block INTEGER NOT NULL, idx INTEGER NOT NULL, depthTokens INTEGER NOT NULL, oldestAgeNs INTEGER NOT NULL);
CREATE TABLE EXPERT_LOAD (
  start INTEGER NOT NULL, end INTEGER NOT NULL, block INTEGER NOT NULL, expert INTEGER NOT NULL,
  device INTEGER NOT NULL, tokens INTEGER NOT NULL);
CREATE TABLE REQUEST_EVENTS (
  timestamp INTEGER NOT NULL, requestId INTEGER NOT NULL, phaseId INTEGER NOT NULL REFERENCES StringIds(id),
  tokensIn INTEGER NOT NULL, tokensOut INTEGER NOT NULL, rank INTEGER NOT NULL);
CREATE TABLE CONTROL_EVENTS (
  timestamp INTEGER, commandId INTEGER REFERENCES StringIds(id), ok INTEGER, json TEXT NOT NULL);
CREATE TABLE SUMMARIES (start INTEGER, end INTEGER, json TEXT NOT NULL);
)sql";

// Built when a recording stops: inserts stay cheap while it runs.
inline constexpr const char* kCreateIndexes = R"sql(
CREATE INDEX IF NOT EXISTS SPANS_start ON SPANS(start);
CREATE INDEX IF NOT EXISTS SPANS_device_start ON SPANS(device, start);
CREATE INDEX IF NOT EXISTS QUEUE_SAMPLES_timestamp ON QUEUE_SAMPLES(timestamp);
CREATE INDEX IF NOT EXISTS QUEUE_SAMPLES_device_timestamp ON QUEUE_SAMPLES(device, timestamp);
CREATE INDEX IF NOT EXISTS EXPERT_LOAD_start ON EXPERT_LOAD(start);
CREATE INDEX IF NOT EXISTS EXPERT_LOAD_block_expert ON EXPERT_LOAD(block, expert);
CREATE INDEX IF NOT EXISTS REQUEST_EVENTS_timestamp ON REQUEST_EVENTS(timestamp);
CREATE INDEX IF NOT EXISTS REQUEST_EVENTS_requestId ON REQUEST_EVENTS(requestId);
CREATE INDEX IF NOT EXISTS CONTROL_EVENTS_timestamp ON CONTROL_EVENTS(timestamp);
CREATE INDEX IF NOT EXISTS SUMMARIES_start ON SUMMARIES(start);
)sql";

}  // namespace sy::telemetry::trace_schema
