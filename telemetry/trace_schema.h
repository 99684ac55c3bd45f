// The SQLite trace schema shared by the recorder and the reader (docs/trace-schema.md is the
// public description; keep both in step and bump kTraceSchemaVersion on any change).
#pragma once

#include <cstdint>

namespace sy::telemetry::trace_schema {

// PRAGMA user_version. 2: spans and queue samples in compressed blocks (SPAN_BLOCKS,
// QUEUE_BLOCKS), and since the overview was added the per-window aggregates of the spans
// (SPAN_WINDOWS; an added table leaves the version as it is, docs/trace-schema.md#versioning:
// readers look for it); 1: one row per span and sample (SPANS, QUEUE_SAMPLES), still read and
// still written on request (`trace export-spans`, the recorder's Rows format).
inline constexpr int kVersion = 2;
inline constexpr int kVersionRows = 1;
inline constexpr std::int32_t kApplicationId = 0x53595452;  // PRAGMA application_id, "SYTR"

// Tables both versions have.
inline constexpr const char* kCreateCommonTables = R"sql(
CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL UNIQUE);
CREATE TABLE META (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE DEVICES (device INTEGER PRIMARY KEY, nameId INTEGER NOT NULL REFERENCES StringIds(id));
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

// Version 2: blocks of one device's records (telemetry/trace_block_codec.h). Their indexes exist
// from the start: a block row is written per thousands of records, so they cost nothing, and a
// recording whose writer was killed is as quick to read by time as a finished one.
inline constexpr const char* kCreateBlockTables = R"sql(
CREATE TABLE SPAN_BLOCKS (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
  count INTEGER NOT NULL, codec INTEGER NOT NULL, rawBytes INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE QUEUE_BLOCKS (
  id INTEGER PRIMARY KEY, device INTEGER NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL,
  count INTEGER NOT NULL, codec INTEGER NOT NULL, rawBytes INTEGER NOT NULL, data BLOB NOT NULL);
CREATE INDEX SPAN_BLOCKS_start ON SPAN_BLOCKS(start);
CREATE INDEX SPAN_BLOCKS_device_start ON SPAN_BLOCKS(device, start);
CREATE INDEX QUEUE_BLOCKS_start ON QUEUE_BLOCKS(start);
)sql";

// Version 2, recordings since the overview: a row per (window, device, lane) with what the spans of that window added up to
// (telemetry/span_windows.h); windows of `windowNs` (the recorder writes 1 s). A window can have
// more than one row (a late record reopens it): readers sum rows of the same key.
inline constexpr const char* kCreateWindowTables = R"sql(
CREATE TABLE SPAN_WINDOWS (
  start INTEGER NOT NULL, windowNs INTEGER NOT NULL, device INTEGER NOT NULL,
  laneId INTEGER NOT NULL REFERENCES StringIds(id),
  spans INTEGER NOT NULL, tokens INTEGER NOT NULL, sampledTokens INTEGER NOT NULL,
  attentionNs INTEGER NOT NULL, expertNs INTEGER NOT NULL, sharedExpertNs INTEGER NOT NULL,
  samplerNs INTEGER NOT NULL, transferNs INTEGER NOT NULL, weightFetchNs INTEGER NOT NULL,
  stallNs INTEGER NOT NULL, mergeNs INTEGER NOT NULL,
  stallQueueEmptyNs INTEGER NOT NULL, stallBarrierNs INTEGER NOT NULL, stallTransferNs INTEGER NOT NULL,
  stallWeightsNs INTEGER NOT NULL, queueTokenNs INTEGER NOT NULL);
CREATE INDEX SPAN_WINDOWS_start ON SPAN_WINDOWS(start);
)sql";

// Version 1: a row per span and per queue sample.
inline constexpr const char* kCreateRowTables = R"sql(
CREATE TABLE SPANS (
  start INTEGER NOT NULL, end INTEGER NOT NULL, device INTEGER NOT NULL,
  laneId INTEGER NOT NULL REFERENCES StringIds(id), kindId INTEGER NOT NULL REFERENCES StringIds(id),
  stallReasonId INTEGER REFERENCES StringIds(id),
  block INTEGER NOT NULL, idx INTEGER NOT NULL, microbatch INTEGER NOT NULL, peer INTEGER NOT NULL,
  tokens INTEGER NOT NULL);
CREATE TABLE QUEUE_SAMPLES (
  timestamp INTEGER NOT NULL, device INTEGER NOT NULL, layerKindId INTEGER NOT NULL REFERENCES StringIds(id),
  block INTEGER NOT NULL, idx INTEGER NOT NULL, depthTokens INTEGER NOT NULL, oldestAgeNs INTEGER NOT NULL);
)sql";

// Built when a recording stops: inserts stay cheap while it runs.
inline constexpr const char* kCreateRowIndexes = R"sql(
CREATE INDEX IF NOT EXISTS SPANS_start ON SPANS(start);
CREATE INDEX IF NOT EXISTS SPANS_device_start ON SPANS(device, start);
CREATE INDEX IF NOT EXISTS QUEUE_SAMPLES_timestamp ON QUEUE_SAMPLES(timestamp);
CREATE INDEX IF NOT EXISTS QUEUE_SAMPLES_device_timestamp ON QUEUE_SAMPLES(device, timestamp);
)sql";
inline constexpr const char* kCreateCommonIndexes = R"sql(
CREATE INDEX IF NOT EXISTS EXPERT_LOAD_start ON EXPERT_LOAD(start);
CREATE INDEX IF NOT EXISTS EXPERT_LOAD_block_expert ON EXPERT_LOAD(block, expert);
CREATE INDEX IF NOT EXISTS REQUEST_EVENTS_timestamp ON REQUEST_EVENTS(timestamp);
CREATE INDEX IF NOT EXISTS REQUEST_EVENTS_requestId ON REQUEST_EVENTS(requestId);
CREATE INDEX IF NOT EXISTS CONTROL_EVENTS_timestamp ON CONTROL_EVENTS(timestamp);
CREATE INDEX IF NOT EXISTS SUMMARIES_start ON SUMMARIES(start);
)sql";

}  // namespace sy::telemetry::trace_schema
