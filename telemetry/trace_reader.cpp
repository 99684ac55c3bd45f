#include "telemetry/trace_reader.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include <sqlite3.h>

#include "telemetry/trace_block_codec.h"
#include "telemetry/trace_schema.h"

namespace sy::telemetry {

namespace {

class Query {
 public:
  Query(sqlite3* db, const char* sql) : db_(db) { ok_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) == SQLITE_OK; }
  ~Query() { sqlite3_finalize(stmt_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  bool ok() const { return ok_; }
  void bind(int col, std::int64_t v) { sqlite3_bind_int64(stmt_, col, v); }
  // True while rows come; `error()` tells a failed step from the end.
  bool next() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) ok_ = false;
    return false;
  }
  std::int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::int32_t i32(int col) const { return static_cast<std::int32_t>(sqlite3_column_int64(stmt_, col)); }
  bool null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string_view blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p == nullptr ? std::string_view() : std::string_view(static_cast<const char*>(p),
                                                                static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p),
                                                      static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  std::string error() const { return sqlite3_errmsg(db_); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  bool ok_ = false;
};

// Maps StringIds ids back to one enum's values by name; unknown names become 255, which every
// name function reports as "unknown".
template <class E>
class EnumIds {
 public:
  template <class NameFn>
  EnumIds(const std::unordered_map<std::string, std::int64_t>& ids, int count, NameFn name) {
    for (int i = 0; i < count; ++i) {
      const E e = static_cast<E>(i);
      if (auto it = ids.find(std::string(name(e))); it != ids.end()) by_id_[it->second] = e;
    }
  }
  E operator()(std::int64_t id) const {
    auto it = by_id_.find(id);
    return it == by_id_.end() ? static_cast<E>(255) : it->second;
  }

 private:
  std::unordered_map<std::int64_t, E> by_id_;
};

class SqliteTraceReader final : public TraceReader {
 public:
  SqliteTraceReader(sqlite3* db, std::string name, int version, bool windows,
                    const std::unordered_map<std::string, std::int64_t>& ids)
      : db_(db),
        name_(std::move(name)),
        version_(version),
        windows_(windows),
        lanes_(ids, 3, lane_name),
        kinds_(ids, kSpanKinds, span_kind_name),
        reasons_(ids, 5, stall_reason_name),
        layers_(ids, 3, layer_kind_name),
        phases_(ids, 5, request_phase_name) {}
  ~SqliteTraceReader() override { sqlite3_close_v2(db_); }

  int schema_version() const override { return version_; }

  std::map<std::string, std::string> metadata() const override {
    std::map<std::string, std::string> out;
    Query q(db_, "SELECT key, value FROM META");
    while (q.ok() && q.next()) out[q.text(0)] = q.text(1);
    return out;
  }

  std::int64_t start_ns() const override { return bound("MIN", "start", "timestamp"); }
  std::int64_t end_ns() const override { return bound("MAX", "end", "timestamp"); }

  std::vector<std::string> device_names() const override {
    std::vector<std::string> out;
    Query q(db_, "SELECT device, value FROM DEVICES JOIN StringIds ON DEVICES.nameId = StringIds.id ORDER BY device");
    while (q.ok() && q.next()) {
      const std::int64_t d = q.i64(0);
      if (d < 0 || d > 1'000'000) continue;
      if (out.size() <= static_cast<std::size_t>(d)) out.resize(static_cast<std::size_t>(d) + 1);
      out[static_cast<std::size_t>(d)] = q.text(1);
    }
    return out;
  }

  StatusOr<std::vector<Span>> spans(std::int64_t t0, std::int64_t t1) const override {
    if (blocks()) {
      return from_blocks<Span>("SPAN_BLOCKS", t0, t1, decode_span_block,
                               [](const Span& s) { return std::pair(s.start_ns, s.end_ns); });
    }
    Query q(db_,
            "SELECT start, end, device, laneId, kindId, stallReasonId, block, idx, microbatch, peer, tokens "
            "FROM SPANS WHERE end >= ?1 AND start <= ?2 ORDER BY start, rowid");
    return rows<Span>(q, t0, t1, "SPANS", [&](const Query& r) {
      Span s;
      s.start_ns = r.i64(0);
      s.end_ns = r.i64(1);
      s.device = r.i32(2);
      s.lane = lanes_(r.i64(3));
      s.kind = kinds_(r.i64(4));
      s.stall_reason = r.null(5) ? StallReason::None : reasons_(r.i64(5));
      s.block = r.i32(6);
      s.index = r.i32(7);
      s.microbatch = r.i32(8);
      s.peer = r.i32(9);
      s.tokens = r.i64(10);
      return s;
    });
  }

  StatusOr<std::vector<QueueSample>> queue_samples(std::int64_t t0, std::int64_t t1) const override {
    if (blocks()) {
      return from_blocks<QueueSample>("QUEUE_BLOCKS", t0, t1, decode_queue_block,
                                      [](const QueueSample& q) { return std::pair(q.t_ns, q.t_ns); });
    }
    Query q(db_,
            "SELECT timestamp, device, layerKindId, block, idx, depthTokens, oldestAgeNs FROM QUEUE_SAMPLES "
            "WHERE timestamp BETWEEN ?1 AND ?2 ORDER BY timestamp, rowid");
    return rows<QueueSample>(q, t0, t1, "QUEUE_SAMPLES", [&](const Query& r) {
      QueueSample s;
      s.t_ns = r.i64(0);
      s.device = r.i32(1);
      s.layer = layers_(r.i64(2));
      s.block = r.i32(3);
      s.index = r.i32(4);
      s.depth_tokens = r.i64(5);
      s.oldest_age_ns = r.i64(6);
      return s;
    });
  }

  StatusOr<std::vector<ExpertLoad>> expert_load(std::int64_t t0, std::int64_t t1) const override {
    Query q(db_,
            "SELECT start, end, block, expert, device, tokens FROM EXPERT_LOAD "
            "WHERE start >= ?1 AND end <= ?2 ORDER BY start, rowid");
    return rows<ExpertLoad>(q, t0, t1, "EXPERT_LOAD", [&](const Query& r) {
      ExpertLoad l;
      l.window_start_ns = r.i64(0);
      l.window_end_ns = r.i64(1);
      l.block = r.i32(2);
      l.expert = r.i32(3);
      l.device = r.i32(4);
      l.tokens = r.i64(5);
      return l;
    });
  }

  StatusOr<std::vector<RequestEvent>> requests(std::int64_t t0, std::int64_t t1) const override {
    Query q(db_,
            "SELECT timestamp, requestId, phaseId, tokensIn, tokensOut, rank FROM REQUEST_EVENTS "
            "WHERE timestamp BETWEEN ?1 AND ?2 ORDER BY timestamp, rowid");
    return rows<RequestEvent>(q, t0, t1, "REQUEST_EVENTS", [&](const Query& r) {
      RequestEvent e;
      e.t_ns = r.i64(0);
      e.request_id = r.i64(1);
      e.phase = phases_(r.i64(2));
      e.tokens_in = r.i32(3);
      e.tokens_out = r.i32(4);
      e.rank = r.i32(5);
      return e;
    });
  }

  bool has_span_windows() const override { return windows_; }

  StatusOr<std::vector<SpanWindow>> span_windows(std::int64_t t0, std::int64_t t1) const override {
    std::vector<SpanWindow> out;
    if (!has_span_windows()) return out;
    Query q(db_,
            "SELECT start, windowNs, device, laneId, spans, tokens, sampledTokens, attentionNs, expertNs, "
            "sharedExpertNs, samplerNs, transferNs, weightFetchNs, stallNs, mergeNs, stallQueueEmptyNs, "
            "stallBarrierNs, stallTransferNs, stallWeightsNs, queueTokenNs FROM SPAN_WINDOWS "
            "WHERE start + windowNs >= ?1 AND start <= ?2 ORDER BY start, device, laneId, rowid");
    if (!q.ok()) return Status::Error(name_ + ": reading SPAN_WINDOWS: " + q.error());
    q.bind(1, t0 == kMin ? kMin : t0);
    q.bind(2, t1);
    while (q.next()) {
      SpanWindow w;
      int col = 0;
      w.start_ns = q.i64(col++);
      w.window_ns = q.i64(col++);
      w.device = q.i32(col++);
      w.lane = lanes_(q.i64(col++));
      w.spans = q.i64(col++);
      w.tokens = q.i64(col++);
      w.sampled_tokens = q.i64(col++);
      for (std::size_t k = 0; k < kSpanKinds; ++k) w.kind_ns[k] = q.i64(col++);
      for (std::size_t r = 1; r < kStallReasons; ++r) w.stall_ns[r] = q.i64(col++);
      w.queue_token_ns = q.i64(col++);
      if (w.window_ns <= 0 || static_cast<std::size_t>(w.lane) >= 3) continue;  // not ours to draw
      if (!out.empty() && out.back().start_ns == w.start_ns && out.back().device == w.device &&
          out.back().lane == w.lane) {
        out.back().merge(w);
      } else {
        out.push_back(w);
      }
    }
    if (!q.ok()) return Status::Error(name_ + ": reading SPAN_WINDOWS: " + q.error());
    return out;
  }

  std::int64_t span_count() const override {
    if (!blocks()) return -1;
    Query q(db_, "SELECT SUM(count) FROM SPAN_BLOCKS");
    if (q.ok() && q.next() && !q.null(0)) return q.i64(0);
    return 0;
  }

  StatusOr<std::vector<std::string>> control_events() const override {
    return texts("SELECT json FROM CONTROL_EVENTS ORDER BY timestamp, rowid", "CONTROL_EVENTS");
  }
  StatusOr<std::vector<std::string>> summaries() const override {
    return texts("SELECT json FROM SUMMARIES ORDER BY start, rowid", "SUMMARIES");
  }

 private:
  bool blocks() const { return version_ >= 2; }

  // The records of the blocks overlapping [t0, t1], those overlapping it themselves, ordered by
  // time (then by block, as written).
  template <class T, class Decode, class Bounds>
  StatusOr<std::vector<T>> from_blocks(const char* table, std::int64_t t0, std::int64_t t1, Decode decode,
                                       Bounds bounds) const {
    const std::string sql = std::string("SELECT device, start, count, codec, rawBytes, data FROM ") + table +
                            " WHERE end >= ?1 AND start <= ?2 ORDER BY start, id";
    Query q(db_, sql.c_str());
    if (!q.ok()) return Status::Error(name_ + ": reading " + table + ": " + q.error());
    q.bind(1, t0);
    q.bind(2, t1);
    std::vector<T> out;
    std::vector<T> block;
    while (q.next()) {
      block.clear();
      const auto count = q.i64(2), raw = q.i64(4);
      if (count < 0 || count > (std::int64_t{1} << 26) || raw < 0 || raw > (std::int64_t{1} << 32) - 1)
        return Status::Error(name_ + ": " + table + " has a block with a bad size");
      const Status s = decode(q.i32(0), q.i64(1), static_cast<std::uint32_t>(count),
                              static_cast<BlockCodec>(q.i64(3)), q.blob(5), static_cast<std::uint32_t>(raw), block);
      if (!s.ok()) return Status::Error(name_ + ": " + table + ": " + s.message());
      for (const T& r : block) {
        const auto [b, e] = bounds(r);
        if (e >= t0 && b <= t1) out.push_back(r);
      }
    }
    if (!q.ok()) return Status::Error(name_ + ": reading " + table + ": " + q.error());
    std::stable_sort(out.begin(), out.end(), [&](const T& a, const T& b) { return bounds(a).first < bounds(b).first; });
    return out;
  }

  template <class T, class Fn>
  StatusOr<std::vector<T>> rows(Query& q, std::int64_t t0, std::int64_t t1, const char* table, Fn make) const {
    if (!q.ok()) return Status::Error(name_ + ": reading " + table + ": " + q.error());
    q.bind(1, t0);
    q.bind(2, t1);
    std::vector<T> out;
    while (q.next()) out.push_back(make(q));
    if (!q.ok()) return Status::Error(name_ + ": reading " + table + ": " + q.error());
    return out;
  }

  StatusOr<std::vector<std::string>> texts(const char* sql, const char* table) const {
    Query q(db_, sql);
    std::vector<std::string> out;
    while (q.ok() && q.next()) out.push_back(q.text(0));
    if (!q.ok()) return Status::Error(name_ + ": reading " + table + ": " + q.error());
    return out;
  }

  std::int64_t bound(const char* fn, const char* interval_column, const char* point_column) const {
    const std::string f = fn;
    // Blocks carry their records' bounds: start is the earliest start, end the latest end.
    const std::string spans = blocks() ? "SELECT " + f + "(" + interval_column + ") AS t FROM SPAN_BLOCKS "
                                       : "SELECT " + f + "(" + interval_column + ") AS t FROM SPANS ";
    const std::string queues = blocks() ? "UNION ALL SELECT " + f + "(" + interval_column + ") FROM QUEUE_BLOCKS "
                                        : "UNION ALL SELECT " + f + "(" + point_column + ") FROM QUEUE_SAMPLES ";
    const std::string sql = "SELECT " + f + "(t) FROM (" + spans + queues + "UNION ALL SELECT " + f + "(" + interval_column + ") FROM EXPERT_LOAD " +
                            "UNION ALL SELECT " + f + "(" + point_column + ") FROM REQUEST_EVENTS " +
                            "UNION ALL SELECT " + f + "(" + point_column + ") FROM CONTROL_EVENTS " +
                            "UNION ALL SELECT " + f + "(" + interval_column + ") FROM SUMMARIES)";
    Query q(db_, sql.c_str());
    if (q.ok() && q.next() && !q.null(0)) return q.i64(0);
    return 0;
  }

  sqlite3* db_;
  std::string name_;
  int version_;
  bool windows_;
  EnumIds<Lane> lanes_;
  EnumIds<SpanKind> kinds_;
  EnumIds<StallReason> reasons_;
  EnumIds<LayerKind> layers_;
  EnumIds<RequestPhase> phases_;
};

}  // namespace

StatusOr<std::unique_ptr<TraceReader>> TraceReader::open(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::Error(name + ": no such file");
  if (std::filesystem::is_directory(path, ec)) return Status::Error(name + ": is a directory");
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(name.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    const std::string why = db != nullptr ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return Status::Error(name + ": cannot open: " + why);
  }
  auto fail = [&](const std::string& message) -> Status {
    sqlite3_close_v2(db);
    return Status::Error(name + ": " + message);
  };
  sqlite3_busy_timeout(db, 2000);
  std::int64_t app_id = 0;
  std::int64_t version = 0;
  {
    Query q(db, "PRAGMA application_id");
    if (!q.ok() || !q.next()) return fail("not an SQLite database (" + q.error() + ")");
    app_id = q.i64(0);
  }
  {
    Query q(db, "PRAGMA user_version");
    if (!q.ok() || !q.next()) return fail("cannot read the schema version (" + q.error() + ")");
    version = q.i64(0);
  }
  if (app_id != trace_schema::kApplicationId) {
    return fail(app_id == 0 && version == 0 ? "not a Switchyard trace (no trace schema: an empty or foreign database)"
                                            : "not a Switchyard trace (application_id " + std::to_string(app_id) + ")");
  }
  if (version < 1) return fail("not a Switchyard trace (schema version " + std::to_string(version) + ")");
  if (version > trace_schema::kVersion) {
    return fail("trace schema version " + std::to_string(version) + " is newer than this reader's (" +
                std::to_string(trace_schema::kVersion) + "); use a newer switchyard");
  }
  std::unordered_map<std::string, std::int64_t> ids;
  {
    Query q(db, "SELECT id, value FROM StringIds");
    while (q.ok() && q.next()) ids[q.text(1)] = q.i64(0);
    if (!q.ok()) return fail("reading StringIds: " + q.error());
  }
  bool windows = false;
  {
    Query q(db, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'SPAN_WINDOWS'");
    windows = q.ok() && q.next() && q.i64(0) > 0;
  }
  return std::unique_ptr<TraceReader>(new SqliteTraceReader(db, name, static_cast<int>(version), windows, ids));
}

}  // namespace sy::telemetry
