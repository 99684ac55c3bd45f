#include "telemetry/trace_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <variant>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "telemetry/span_windows.h"
#include "telemetry/trace_schema.h"

namespace sy::telemetry {

namespace {

using JsonItem = std::pair<Topic, std::string>;
using Item = std::variant<std::vector<Span>, std::vector<QueueSample>, std::vector<ExpertLoad>,
                          std::vector<RequestEvent>, JsonItem>;

std::size_t item_records(const Item& item) {
  return std::visit(
      [](const auto& v) -> std::size_t {
        if constexpr (std::is_same_v<std::decay_t<decltype(v)>, JsonItem>) {
          return 1;
        } else {
          return v.size();
        }
      },
      item);
}

// A prepared statement that finalizes itself.
struct Statement {
  sqlite3_stmt* stmt = nullptr;
  Statement() = default;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement() { sqlite3_finalize(stmt); }
};

std::int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// Early returns for the schema steps, used only inside State (whose members return Status).
#define SY_TRY(expr)                               \
  do {                                             \
    if (Status sy_try_status = (expr); !sy_try_status.ok()) return sy_try_status; \
  } while (0)
#define SY_TRY_ASSIGN(lhs, expr)                   \
  do {                                             \
    auto sy_try_result = (expr);                   \
    if (!sy_try_result.ok()) return sy_try_result.status(); \
    (lhs) = *sy_try_result;                        \
  } while (0)

struct TraceRecorder::State {
  using Clock = std::chrono::steady_clock;
  // One device's records waiting to fill a block (writer thread only).
  template <class T>
  struct Pending {
    std::vector<T> records;
    Clock::time_point since;
  };

  RecorderOptions options;
  sqlite3* db = nullptr;
  Statement insert_string, insert_span, insert_queue, insert_load, insert_request, insert_control, insert_summary;
  Statement insert_span_block, insert_queue_block, insert_window;
  // SPAN_WINDOWS: what the spans of each second added up to (writer thread only).
  SpanWindowAccumulator windows{1'000'000'000};
  std::vector<SpanWindow> closed_windows;
  std::uint64_t uncommitted_windows = 0;
  std::map<std::int32_t, Pending<Span>> pending_spans;
  std::map<std::int32_t, Pending<QueueSample>> pending_queues;
  std::uint64_t uncommitted_records = 0;  // in the open transaction
  std::uint64_t uncommitted_blocks = 0;
  std::unordered_map<std::string, std::int64_t> string_ids;
  std::int64_t lane_ids[3] = {}, kind_ids[kSpanKinds] = {}, reason_ids[5] = {}, layer_ids[3] = {}, phase_ids[5] = {};

  mutable std::mutex mu;
  std::condition_variable work;
  std::condition_variable committed;
  std::vector<Item> queue;
  std::size_t queued_records = 0;
  std::uint64_t enqueued_seq = 0;   // items accepted so far
  std::uint64_t committed_seq = 0;  // items written (or given up on) so far
  std::uint64_t flush_requests = 0;  // flush() calls, each forcing the partial blocks out
  std::uint64_t flushes_done = 0;
  bool stopping = false;
  bool stopped = false;
  Status error;
  RecorderStats stats;
  std::thread writer;

  ~State() {
    if (db != nullptr) sqlite3_close_v2(db);
  }

  Status sql_error(const std::string& what) const {
    return Status::Error(options.path.string() + ": " + what + ": " + sqlite3_errmsg(db));
  }

  Status exec(const char* sql, const std::string& what) {
    char* message = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
      std::string text = message != nullptr ? message : sqlite3_errmsg(db);
      sqlite3_free(message);
      return Status::Error(options.path.string() + ": " + what + ": " + text);
    }
    return Status::Ok();
  }

  Status prepare(Statement& s, const char* sql) {
    if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s.stmt, nullptr) != SQLITE_OK) {
      return sql_error("preparing a statement");
    }
    return Status::Ok();
  }

  // Steps a bound statement and resets it for the next row.
  bool step(Statement& s) {
    const int rc = sqlite3_step(s.stmt);
    sqlite3_reset(s.stmt);
    return rc == SQLITE_DONE;
  }

  // The id of `value` in StringIds, inserting it the first time.
  StatusOr<std::int64_t> intern(std::string_view value) {
    std::string key(value);
    if (auto it = string_ids.find(key); it != string_ids.end()) return it->second;
    const auto id = static_cast<std::int64_t>(string_ids.size()) + 1;
    sqlite3_bind_int64(insert_string.stmt, 1, id);
    sqlite3_bind_text(insert_string.stmt, 2, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
    if (!step(insert_string)) return sql_error("inserting into StringIds");
    string_ids.emplace(std::move(key), id);
    return id;
  }

  // Enum values index the cached ids; a value beyond the known ones is interned by its name ("unknown").
  template <class E, std::size_t N, class NameFn>
  std::int64_t enum_id(const std::int64_t (&ids)[N], E value, NameFn name) {
    const auto i = static_cast<std::size_t>(value);
    if (i < N) return ids[i];
    auto id = intern(name(value));
    return id.ok() ? *id : 0;
  }

  bool blocks() const { return options.format == TraceFormat::Blocks; }
  bool windowed() const { return blocks() && options.span_windows; }
  int version() const { return blocks() ? trace_schema::kVersion : trace_schema::kVersionRows; }

  Status create(const std::map<std::string, std::string>& metadata, const std::vector<std::string>& devices) {
    // WAL: readers (the console, `trace summarize`) see committed batches while we write, and a
    // killed writer leaves a database that recovers on open. NORMAL syncs at checkpoints only:
    // a power cut may lose the last transactions, never the file's consistency.
    sqlite3_busy_timeout(db, 5000);
    SY_TRY(exec("PRAGMA journal_mode=WAL", "setting WAL mode"));
    SY_TRY(exec("PRAGMA synchronous=NORMAL", "setting synchronous=NORMAL"));
    const std::string pragmas = "PRAGMA application_id=" + std::to_string(trace_schema::kApplicationId) +
                                ";PRAGMA user_version=" + std::to_string(version());
    SY_TRY(exec("BEGIN", "starting the schema transaction"));
    SY_TRY(exec(pragmas.c_str(), "setting the schema version"));
    SY_TRY(exec(trace_schema::kCreateCommonTables, "creating tables"));
    SY_TRY(exec(blocks() ? trace_schema::kCreateBlockTables : trace_schema::kCreateRowTables, "creating tables"));
    if (windowed()) SY_TRY(exec(trace_schema::kCreateWindowTables, "creating tables"));
    SY_TRY(prepare(insert_string, "INSERT INTO StringIds(id, value) VALUES(?,?)"));
    for (std::size_t i = 0; i < 3; ++i) SY_TRY_ASSIGN(lane_ids[i], intern(lane_name(static_cast<Lane>(i))));
    for (std::size_t i = 0; i < kSpanKinds; ++i) SY_TRY_ASSIGN(kind_ids[i], intern(span_kind_name(static_cast<SpanKind>(i))));
    for (std::size_t i = 0; i < 5; ++i) {
      SY_TRY_ASSIGN(reason_ids[i], intern(stall_reason_name(static_cast<StallReason>(i))));
    }
    for (std::size_t i = 0; i < 3; ++i) SY_TRY_ASSIGN(layer_ids[i], intern(layer_kind_name(static_cast<LayerKind>(i))));
    for (std::size_t i = 0; i < 5; ++i) {
      SY_TRY_ASSIGN(phase_ids[i], intern(request_phase_name(static_cast<RequestPhase>(i))));
    }

    Statement meta;
    SY_TRY(prepare(meta, "INSERT OR REPLACE INTO META(key, value) VALUES(?,?)"));
    std::map<std::string, std::string> rows = metadata;
    rows["schema"] = "switchyard-trace";
    rows["schema_version"] = std::to_string(version());
    if (blocks()) rows["block_codec"] = std::string(block_codec_name(options.codec));
    rows["complete"] = "0";
    rows["started_unix_ns"] = std::to_string(unix_now_ns());
    for (const auto& [k, v] : rows) {
      sqlite3_bind_text(meta.stmt, 1, k.data(), static_cast<int>(k.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(meta.stmt, 2, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
      if (!step(meta)) return sql_error("writing META");
    }

    // Device names: given explicitly, or taken from the meta object's "devices" array.
    std::vector<std::string> names = devices;
    if (names.empty()) {
      if (auto it = metadata.find("devices"); it != metadata.end()) {
        const auto doc = nlohmann::json::parse(it->second, nullptr, false);
        if (doc.is_array()) {
          for (const auto& d : doc) {
            if (!d.is_object() || !d.contains("index") || !d["index"].is_number_integer()) continue;
            const auto index = d["index"].get<std::int64_t>();
            if (index < 0 || index > 1'000'000) continue;
            if (names.size() <= static_cast<std::size_t>(index)) names.resize(static_cast<std::size_t>(index) + 1);
            names[static_cast<std::size_t>(index)] =
                d.contains("name") && d["name"].is_string() ? d["name"].get<std::string>() : "";
          }
        }
      }
    }
    Statement device;
    SY_TRY(prepare(device, "INSERT INTO DEVICES(device, nameId) VALUES(?,?)"));
    for (std::size_t i = 0; i < names.size(); ++i) {
      const std::string name = names[i].empty() ? "device" + std::to_string(i) : names[i];
      std::int64_t id = 0;
      SY_TRY_ASSIGN(id, intern(name));
      sqlite3_bind_int64(device.stmt, 1, static_cast<std::int64_t>(i));
      sqlite3_bind_int64(device.stmt, 2, id);
      if (!step(device)) return sql_error("writing DEVICES");
    }
    SY_TRY(exec("COMMIT", "committing the schema"));

    if (blocks()) {
      SY_TRY(prepare(insert_span_block,
                     "INSERT INTO SPAN_BLOCKS(device, start, end, count, codec, rawBytes, data) VALUES(?,?,?,?,?,?,?)"));
      SY_TRY(prepare(insert_queue_block,
                     "INSERT INTO QUEUE_BLOCKS(device, start, end, count, codec, rawBytes, data) VALUES(?,?,?,?,?,?,?)"));
      if (windowed())
        SY_TRY(prepare(insert_window,
                     "INSERT INTO SPAN_WINDOWS(start, windowNs, device, laneId, spans, tokens, sampledTokens, "
                     "attentionNs, expertNs, sharedExpertNs, samplerNs, transferNs, weightFetchNs, stallNs, mergeNs, "
                     "stallQueueEmptyNs, stallBarrierNs, stallTransferNs, stallWeightsNs, queueTokenNs) "
                     "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    } else {
      SY_TRY(prepare(insert_span,
                     "INSERT INTO SPANS(start, end, device, laneId, kindId, stallReasonId, block, idx, microbatch, "
                     "peer, tokens) VALUES(?,?,?,?,?,?,?,?,?,?,?)"));
      SY_TRY(prepare(insert_queue,
                     "INSERT INTO QUEUE_SAMPLES(timestamp, device, layerKindId, block, idx, depthTokens, oldestAgeNs) "
                     "VALUES(?,?,?,?,?,?,?)"));
    }
    SY_TRY(prepare(insert_load,
                   "INSERT INTO EXPERT_LOAD(start, end, block, expert, device, tokens) VALUES(?,?,?,?,?,?)"));
    SY_TRY(prepare(insert_request,
                   "INSERT INTO REQUEST_EVENTS(timestamp, requestId, phaseId, tokensIn, tokensOut, rank) "
                   "VALUES(?,?,?,?,?,?)"));
    SY_TRY(prepare(insert_control, "INSERT INTO CONTROL_EVENTS(timestamp, commandId, ok, json) VALUES(?,?,?,?)"));
    SY_TRY(prepare(insert_summary, "INSERT INTO SUMMARIES(start, end, json) VALUES(?,?,?)"));
    return Status::Ok();
  }

  bool write_block(Statement& st, const EncodedBlock& b) {
    sqlite3_bind_int64(st.stmt, 1, b.device);
    sqlite3_bind_int64(st.stmt, 2, b.start_ns);
    sqlite3_bind_int64(st.stmt, 3, b.end_ns);
    sqlite3_bind_int64(st.stmt, 4, b.count);
    sqlite3_bind_int64(st.stmt, 5, static_cast<std::int64_t>(b.codec));
    sqlite3_bind_int64(st.stmt, 6, b.raw_bytes);
    sqlite3_bind_blob(st.stmt, 7, b.data.data(), static_cast<int>(b.data.size()), SQLITE_STATIC);
    if (!step(st)) return false;
    uncommitted_records += b.count;
    ++uncommitted_blocks;
    return true;
  }

  bool write_pending(std::int32_t device, Pending<Span>& p) {
    const bool ok = write_block(insert_span_block, encode_span_block(device, p.records, options.codec, options.codec_level));
    p.records.clear();
    return ok;
  }
  bool write_pending(std::int32_t device, Pending<QueueSample>& p) {
    const bool ok =
        write_block(insert_queue_block, encode_queue_block(device, p.records, options.codec, options.codec_level));
    p.records.clear();
    return ok;
  }

  // Adds records to their device's pending block, writing each block that fills.
  template <class T>
  bool buffer(std::map<std::int32_t, Pending<T>>& pending, const std::vector<T>& v) {
    const auto now = Clock::now();
    const std::size_t limit = std::max<std::uint32_t>(options.block_records, 1);
    for (const T& r : v) {
      Pending<T>& p = pending[r.device];
      if (p.records.empty()) p.since = now;
      p.records.push_back(r);
      if (p.records.size() >= limit && !write_pending(r.device, p)) return false;
    }
    return true;
  }

  // Writes the pending blocks whose oldest record waited long enough, or all of them.
  bool write_due_blocks(bool all) {
    const auto due = Clock::now() - options.block_max_age;
    for (auto& [device, p] : pending_spans)
      if (!p.records.empty() && (all || p.since <= due) && !write_pending(device, p)) return false;
    for (auto& [device, p] : pending_queues)
      if (!p.records.empty() && (all || p.since <= due) && !write_pending(device, p)) return false;
    return true;
  }

  bool any_pending() const {
    for (const auto& [device, p] : pending_spans)
      if (!p.records.empty()) return true;
    for (const auto& [device, p] : pending_queues)
      if (!p.records.empty()) return true;
    return false;
  }

  void drop_pending() {
    for (auto& [device, p] : pending_spans) {
      stats.records_dropped += p.records.size();
      p.records.clear();
    }
    for (auto& [device, p] : pending_queues) {
      stats.records_dropped += p.records.size();
      p.records.clear();
    }
  }

  // Closes the windows that no record is expected in any more (two windows behind the newest
  // time seen, or all of them) and writes them.
  bool write_windows(bool all) {
    closed_windows.clear();
    if (all)
      windows.close_all(closed_windows);
    else
      windows.close_before(windows.latest_ns() - 2 * windows.window_ns(), closed_windows);
    for (const SpanWindow& w : closed_windows) {
      sqlite3_stmt* st = insert_window.stmt;
      int col = 1;
      sqlite3_bind_int64(st, col++, w.start_ns);
      sqlite3_bind_int64(st, col++, w.window_ns);
      sqlite3_bind_int64(st, col++, w.device);
      sqlite3_bind_int64(st, col++, enum_id(lane_ids, w.lane, lane_name));
      sqlite3_bind_int64(st, col++, w.spans);
      sqlite3_bind_int64(st, col++, w.tokens);
      sqlite3_bind_int64(st, col++, w.sampled_tokens);
      for (std::size_t k = 0; k < kSpanKinds; ++k) sqlite3_bind_int64(st, col++, w.kind_ns[k]);
      for (std::size_t r = 1; r < kStallReasons; ++r) sqlite3_bind_int64(st, col++, w.stall_ns[r]);
      sqlite3_bind_int64(st, col++, w.queue_token_ns);
      if (!step(insert_window)) return false;
      ++uncommitted_windows;
    }
    return true;
  }

  bool write(const std::vector<Span>& v) {
    if (blocks()) {
      if (windowed())
        for (const Span& s : v) windows.add(s);
      return buffer(pending_spans, v);
    }
    uncommitted_records += v.size();
    for (const Span& s : v) {
      sqlite3_stmt* st = insert_span.stmt;
      sqlite3_bind_int64(st, 1, s.start_ns);
      sqlite3_bind_int64(st, 2, s.end_ns);
      sqlite3_bind_int64(st, 3, s.device);
      sqlite3_bind_int64(st, 4, enum_id(lane_ids, s.lane, lane_name));
      sqlite3_bind_int64(st, 5, enum_id(kind_ids, s.kind, span_kind_name));
      if (s.stall_reason == StallReason::None) {
        sqlite3_bind_null(st, 6);
      } else {
        sqlite3_bind_int64(st, 6, enum_id(reason_ids, s.stall_reason, stall_reason_name));
      }
      sqlite3_bind_int64(st, 7, s.block);
      sqlite3_bind_int64(st, 8, s.index);
      sqlite3_bind_int64(st, 9, s.microbatch);
      sqlite3_bind_int64(st, 10, s.peer);
      sqlite3_bind_int64(st, 11, s.tokens);
      if (!step(insert_span)) return false;
    }
    return true;
  }

  bool write(const std::vector<QueueSample>& v) {
    if (blocks()) {
      if (windowed())
        for (const QueueSample& q : v) windows.add(q);
      return buffer(pending_queues, v);
    }
    uncommitted_records += v.size();
    for (const QueueSample& q : v) {
      sqlite3_stmt* st = insert_queue.stmt;
      sqlite3_bind_int64(st, 1, q.t_ns);
      sqlite3_bind_int64(st, 2, q.device);
      sqlite3_bind_int64(st, 3, enum_id(layer_ids, q.layer, layer_kind_name));
      sqlite3_bind_int64(st, 4, q.block);
      sqlite3_bind_int64(st, 5, q.index);
      sqlite3_bind_int64(st, 6, q.depth_tokens);
      sqlite3_bind_int64(st, 7, q.oldest_age_ns);
      if (!step(insert_queue)) return false;
    }
    return true;
  }

  bool write(const std::vector<ExpertLoad>& v) {
    uncommitted_records += v.size();
    for (const ExpertLoad& l : v) {
      sqlite3_stmt* st = insert_load.stmt;
      sqlite3_bind_int64(st, 1, l.window_start_ns);
      sqlite3_bind_int64(st, 2, l.window_end_ns);
      sqlite3_bind_int64(st, 3, l.block);
      sqlite3_bind_int64(st, 4, l.expert);
      sqlite3_bind_int64(st, 5, l.device);
      sqlite3_bind_int64(st, 6, l.tokens);
      if (!step(insert_load)) return false;
    }
    return true;
  }

  bool write(const std::vector<RequestEvent>& v) {
    uncommitted_records += v.size();
    for (const RequestEvent& r : v) {
      sqlite3_stmt* st = insert_request.stmt;
      sqlite3_bind_int64(st, 1, r.t_ns);
      sqlite3_bind_int64(st, 2, r.request_id);
      sqlite3_bind_int64(st, 3, enum_id(phase_ids, r.phase, request_phase_name));
      sqlite3_bind_int64(st, 4, r.tokens_in);
      sqlite3_bind_int64(st, 5, r.tokens_out);
      sqlite3_bind_int64(st, 6, r.rank);
      if (!step(insert_request)) return false;
    }
    return true;
  }

  bool write(const JsonItem& item) {
    const auto& [topic, text] = item;
    ++uncommitted_records;
    // The columns beside the JSON make the objects queryable; a key that is missing or of
    // another type leaves its column NULL rather than losing the object.
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    auto bind_int = [&](sqlite3_stmt* st, int col, const char* key) {
      if (doc.is_object() && doc.contains(key) && doc[key].is_number()) {
        sqlite3_bind_int64(st, col, doc[key].get<std::int64_t>());
      } else {
        sqlite3_bind_null(st, col);
      }
    };
    if (topic == Topic::Control) {
      sqlite3_stmt* st = insert_control.stmt;
      bind_int(st, 1, "t_ns");
      sqlite3_bind_null(st, 2);
      if (doc.is_object() && doc.contains("cmd") && doc["cmd"].is_string()) {
        auto id = intern(doc["cmd"].get<std::string>());
        if (!id.ok()) return false;
        sqlite3_bind_int64(st, 2, *id);
      }
      if (doc.is_object() && doc.contains("ok") && doc["ok"].is_boolean()) {
        sqlite3_bind_int(st, 3, doc["ok"].get<bool>() ? 1 : 0);
      } else {
        sqlite3_bind_null(st, 3);
      }
      sqlite3_bind_text(st, 4, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
      return step(insert_control);
    }
    sqlite3_stmt* st = insert_summary.stmt;
    bind_int(st, 1, "t_begin_ns");
    bind_int(st, 2, "t_end_ns");
    sqlite3_bind_text(st, 3, text.data(), static_cast<int>(text.size()), SQLITE_STATIC);
    return step(insert_summary);
  }

  // The database's size as SQLite sees it (pages in the file and in the write-ahead log).
  std::uint64_t database_bytes() {
    std::int64_t pages = 0, page_size = 0;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA page_count", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      pages = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      page_size = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return static_cast<std::uint64_t>(pages * page_size);
  }

  // Writes one batch of items, and the blocks that are due (all with `all_blocks`), in one
  // transaction; false when there was nothing to write.
  StatusOr<bool> write_all(const std::vector<Item>& items, bool all_blocks) {
    uncommitted_records = 0;
    uncommitted_blocks = 0;
    uncommitted_windows = 0;
    const bool windows_due = windowed() && all_blocks && !windows.empty();
    if (items.empty() && !any_pending() && !windows_due) return false;
    if (sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) return sql_error("BEGIN");
    for (const Item& item : items) {
      if (!std::visit([&](const auto& v) { return write(v); }, item)) {
        const Status s = sql_error("writing events");
        sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
        return s;
      }
    }
    if (!write_due_blocks(all_blocks)) {
      const Status s = sql_error("writing blocks");
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return s;
    }
    if (windowed() && !write_windows(all_blocks)) {
      const Status s = sql_error("writing SPAN_WINDOWS");
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return s;
    }
    if (items.empty() && uncommitted_blocks == 0 && uncommitted_windows == 0) {  // only blocks that are not due yet
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return false;
    }
    if (sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) {
      const Status s = sql_error("COMMIT");
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      return s;
    }
    return true;
  }

  void run() {
    std::vector<Item> batch;
    std::unique_lock lock(mu);
    const auto poll = std::max(options.block_max_age / 4, std::chrono::milliseconds(10));
    while (true) {
      auto ready = [&] { return stopping || !queue.empty() || flush_requests > flushes_done; };
      // Partial blocks age while the stream is quiet: wake up to write them when due.
      if (any_pending()) {
        work.wait_for(lock, poll, ready);
      } else {
        work.wait(lock, ready);
      }
      const bool last = stopping && queue.empty();
      const std::uint64_t flush_target = flush_requests;
      const bool all_blocks = last || flush_target > flushes_done;
      batch.swap(queue);
      const std::size_t records = queued_records;
      queued_records = 0;
      const std::uint64_t seq = enqueued_seq;
      const bool failed = !error.ok() || stats.size_capped;
      lock.unlock();
      StatusOr<bool> s = failed ? StatusOr<bool>(false) : write_all(batch, all_blocks);
      batch.clear();
      lock.lock();
      if (failed || !s.ok()) {
        if (error.ok() && !s.ok()) error = s.status();
        stats.records_dropped += records;
        drop_pending();
      } else if (*s) {
        stats.records_written += uncommitted_records;
        stats.blocks_written += uncommitted_blocks;
        ++stats.transactions;
        // Past the cap the file is complete up to here; what follows is dropped and counted.
        if (options.max_bytes > 0 && database_bytes() >= options.max_bytes) stats.size_capped = true;
      }
      committed_seq = seq;
      flushes_done = flush_target;
      committed.notify_all();
      if (last) return;
    }
  }

  bool enqueue(Item item) {
    const std::size_t n = item_records(item);
    {
      std::lock_guard lock(mu);
      if (stopping || queued_records + n > options.max_queued_records) {
        stats.records_dropped += n;
        return false;
      }
      queue.push_back(std::move(item));
      queued_records += n;
      ++enqueued_seq;
    }
    work.notify_one();
    return true;
  }
};

#undef SY_TRY
#undef SY_TRY_ASSIGN

TraceRecorder::TraceRecorder(std::unique_ptr<State> state) : state_(std::move(state)) {}

StatusOr<std::unique_ptr<TraceRecorder>> TraceRecorder::open(RecorderOptions options) {
  const std::filesystem::path path = options.path;
  const std::string name = path.string();
  if (name.empty()) return Status::Error("recording path is empty");
  std::error_code ec;
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
  if (!std::filesystem::is_directory(parent, ec)) return Status::Error(name + ": directory " + parent.string() + " does not exist");
  if (std::filesystem::exists(path, ec)) {
    if (!options.overwrite) return Status::Error(name + ": file exists; choose a new path (or allow overwriting)");
    if (std::filesystem::is_directory(path, ec)) return Status::Error(name + ": is a directory");
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(name + suffix, ec);
  }
  // Created exclusively, so two recordings can never write into one file.
  const int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Error(name + ": cannot create: " + std::strerror(errno));
  ::close(fd);

  auto state = std::make_unique<State>();
  state->options = std::move(options);
  if (sqlite3_open_v2(name.c_str(), &state->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
    const Status s = state->sql_error("cannot open as SQLite");
    state.reset();
    std::filesystem::remove(path, ec);
    return s;
  }
  if (Status s = state->create(state->options.metadata, state->options.device_names); !s.ok()) {
    state.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(name + suffix, ec);
    return s;
  }
  State* raw = state.get();
  state->writer = std::thread([raw] { raw->run(); });
  return std::unique_ptr<TraceRecorder>(new TraceRecorder(std::move(state)));
}

TraceRecorder::~TraceRecorder() { (void)stop(); }

bool TraceRecorder::add(std::span<const Span> r) { return state_->enqueue(std::vector<Span>(r.begin(), r.end())); }
bool TraceRecorder::add(std::span<const QueueSample> r) {
  return state_->enqueue(std::vector<QueueSample>(r.begin(), r.end()));
}
bool TraceRecorder::add(std::span<const ExpertLoad> r) {
  return state_->enqueue(std::vector<ExpertLoad>(r.begin(), r.end()));
}
bool TraceRecorder::add(std::span<const RequestEvent> r) {
  return state_->enqueue(std::vector<RequestEvent>(r.begin(), r.end()));
}

bool TraceRecorder::add_json(Topic topic, std::string object_json) {
  if (topic != Topic::Control && topic != Topic::Summary) return false;
  return state_->enqueue(JsonItem{topic, std::move(object_json)});
}

Status TraceRecorder::flush() {
  State& s = *state_;
  std::unique_lock lock(s.mu);
  const std::uint64_t target = s.enqueued_seq;
  const std::uint64_t request = ++s.flush_requests;
  s.work.notify_one();
  s.committed.wait(lock, [&] { return (s.committed_seq >= target && s.flushes_done >= request) || s.stopped; });
  return s.error;
}

Status TraceRecorder::stop(const std::map<std::string, std::string>& final_metadata) {
  State& s = *state_;
  {
    std::lock_guard lock(s.mu);
    if (s.stopped) return s.error;
    s.stopping = true;
  }
  s.work.notify_all();
  if (s.writer.joinable()) s.writer.join();

  Status result = s.error;
  const RecorderStats stats = this->stats();
  const std::string finish =
      std::string(s.blocks() ? "" : trace_schema::kCreateRowIndexes) + trace_schema::kCreateCommonIndexes + "INSERT OR REPLACE INTO META(key, value) VALUES" +
      "('complete','1'),('stopped_unix_ns','" + std::to_string(unix_now_ns()) + "'),('records_written','" +
      std::to_string(stats.records_written) + "'),('records_dropped','" + std::to_string(stats.records_dropped) +
      "'),('size_capped','" + (stats.size_capped ? "1" : "0") + "')" + [&] {
        // SQL string literals: a quote is doubled.
        const auto literal = [](const std::string& v) {
          std::string out = "'";
          for (char ch : v) out += ch == '\'' ? std::string("''") : std::string(1, ch);
          return out + "'";
        };
        std::string rows;
        for (const auto& [key, value] : final_metadata) rows += ",(" + literal(key) + "," + literal(value) + ")";
        return rows;
      }() + ";";
  // Indexes and the completion mark in one transaction; then back to a single self-contained
  // file (no -wal/-shm), which opens anywhere, also read-only media.
  Status fin = s.exec(("BEGIN;" + finish + "COMMIT;").c_str(), "building indexes");
  if (!fin.ok()) sqlite3_exec(s.db, "ROLLBACK", nullptr, nullptr, nullptr);
  if (result.ok()) result = fin;
  for (Statement* st : {&s.insert_string, &s.insert_span, &s.insert_queue, &s.insert_load, &s.insert_request,
                        &s.insert_control, &s.insert_summary, &s.insert_span_block, &s.insert_queue_block,
                        &s.insert_window}) {
    sqlite3_finalize(st->stmt);
    st->stmt = nullptr;
  }
  if (Status j = s.exec("PRAGMA journal_mode=DELETE", "leaving WAL mode"); result.ok()) result = j;
  if (sqlite3_close(s.db) != SQLITE_OK && result.ok()) result = s.sql_error("closing");
  s.db = nullptr;
  std::lock_guard lock(s.mu);
  s.stopped = true;
  if (s.error.ok()) s.error = result;
  s.committed.notify_all();
  return result;
}

RecorderStats TraceRecorder::stats() const {
  std::lock_guard lock(state_->mu);
  return state_->stats;
}

const std::filesystem::path& TraceRecorder::path() const { return state_->options.path; }

}  // namespace sy::telemetry
