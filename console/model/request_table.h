// Requests seen in the stream (request lifecycle events folded into one row per request), with
// derived latencies; bounded to the newest N requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

#include "telemetry/events.h"

namespace sy::console {

struct RequestRow {
  static constexpr std::int64_t kNever = -1;
  std::int64_t id = 0;
  std::int64_t arrival_ns = kNever;
  std::int64_t admitted_ns = kNever;
  std::int64_t first_token_ns = kNever;
  std::int64_t finished_ns = kNever;
  std::int32_t tokens_in = 0;
  std::int32_t tokens_out = 0;
  std::int32_t rank = -1;
  telemetry::RequestPhase phase = telemetry::RequestPhase::Arrival;  // the latest step

  // Time to first token and mean inter-token latency; kNever until known.
  std::int64_t ttft_ns() const;
  std::int64_t mean_itl_ns() const;
};

class RequestTable {
 public:
  explicit RequestTable(std::size_t max_rows = 20000) : max_rows_(max_rows) {}

  void set_max_rows(std::size_t n) { max_rows_ = n; }
  void add(const telemetry::RequestEvent& event);
  void clear();

  const std::map<std::int64_t, RequestRow>& rows() const { return rows_; }
  std::size_t size() const { return rows_.size(); }
  // Changes whenever a row changes: views cache their sorted order against it.
  std::uint64_t version() const { return version_; }
  std::size_t count(telemetry::RequestPhase phase) const;

 private:
  std::size_t max_rows_;
  std::map<std::int64_t, RequestRow> rows_;  // by id: ids grow, so the oldest go first
  std::uint64_t version_ = 0;
};

}  // namespace sy::console
