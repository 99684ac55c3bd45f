#include "console/model/span_folding.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace sy::console {
namespace {

constexpr std::size_t kKinds = telemetry::kSpanKinds;

void colour_fold(const LaneSpans& lane, int samples, TimelineItem& item) {
  std::array<int, kKinds> votes{};
  std::array<std::int64_t, 5> by_reason{};
  std::int64_t stalled = 0, total = 0;
  const std::size_t n = std::min<std::size_t>(item.count, static_cast<std::size_t>(std::max(1, samples)));
  for (std::size_t k = 0; k < n; ++k) {
    // Evenly spaced members, first and last included.
    const std::size_t offset = n == 1 ? 0 : k * (item.count - 1) / (n - 1);
    const telemetry::Span& s = lane[item.first + offset];
    const auto kind = static_cast<std::size_t>(s.kind);
    if (kind < kKinds) ++votes[kind];
    total += s.end_ns - s.start_ns;
    if (s.kind == telemetry::SpanKind::Stall) {
      item.has_stall = true;
      stalled += s.end_ns - s.start_ns;
      const auto reason = static_cast<std::size_t>(s.stall_reason);
      if (reason < by_reason.size()) by_reason[reason] += s.end_ns - s.start_ns;
    }
  }
  std::size_t top = 0;
  for (std::size_t r = 1; r < by_reason.size(); ++r)
    if (by_reason[r] > by_reason[top]) top = r;
  item.stall_reason = by_reason[top] > 0 ? static_cast<telemetry::StallReason>(top) : telemetry::StallReason::None;
  item.stall_share = total > 0 ? static_cast<float>(static_cast<double>(stalled) / static_cast<double>(total)) : 0.0f;
  // Stalls only win a fold they dominate, so a busy device's folds read as busy.
  std::size_t best = 0;
  for (std::size_t k = 1; k < kKinds; ++k)
    if (votes[k] > votes[best]) best = k;
  item.kind = static_cast<telemetry::SpanKind>(best);
}

}  // namespace

void fold_lane(const LaneSpans& lane, std::int64_t t0_ns, std::int64_t t1_ns, const FoldOptions& options,
               std::vector<TimelineItem>& out) {
  if (lane.empty() || t1_ns < t0_ns) return;
  const auto min_ns = static_cast<std::int64_t>(
      std::max(1.0, std::ceil(options.min_width_px * std::max(options.ns_per_pixel, 0.0))));
  const auto max_fold_ns = std::max<std::int64_t>(
      min_ns, static_cast<std::int64_t>(options.max_fold_px * std::max(options.ns_per_pixel, 0.0)));
  std::size_t i = lane.first_ending_at_or_after(t0_ns);
  const std::size_t end = lane.first_starting_after(t1_ns);
  // On a lane whose spans overlap (transfers), one long span keeps the running maximum of ends
  // high and the search above lands far before t0; look back a bounded number of spans instead,
  // so a frame never scans the run. A span longer than that look-back window can be missed.
  constexpr std::size_t kMaxLookBack = 4096;
  const std::size_t first_inside = lane.first_starting_at_or_after(t0_ns);
  if (first_inside > i + kMaxLookBack) i = first_inside - kMaxLookBack;

  while (i < end) {
    const telemetry::Span& s = lane[i];
    if (s.end_ns < t0_ns) {  // an earlier long span kept the running maximum high: not visible
      ++i;
      continue;
    }
    if (s.end_ns - s.start_ns >= min_ns) {
      out.push_back({s.start_ns, s.end_ns, i, 1, s.kind, s.kind == telemetry::SpanKind::Stall});
      ++i;
      continue;
    }
    // A narrow span opens a fold; it swallows whatever ends within min_ns of the fold's end,
    // then any narrow neighbour that starts within min_ns of it, until a gap or a wide span.
    std::int64_t fold_end = s.end_ns;
    std::size_t j = i + 1;
    while (j < end && fold_end - s.start_ns < max_fold_ns) {
      const std::size_t k = std::min(end, std::max(j, lane.first_ending_at_or_after(fold_end + min_ns)));
      if (k > j) {
        fold_end = std::max(fold_end, lane[k - 1].end_ns);
        j = k;
        if (j >= end) break;
      }
      const telemetry::Span& next = lane[j];
      if (next.end_ns - next.start_ns < min_ns && next.start_ns - fold_end < min_ns) {
        fold_end = std::max(fold_end, next.end_ns);
        ++j;
        continue;
      }
      break;
    }
    TimelineItem item{s.start_ns, fold_end, i, j - i, s.kind, s.kind == telemetry::SpanKind::Stall};
    if (item.folded()) colour_fold(lane, options.fold_samples, item);
    out.push_back(item);
    i = j;
  }
}

}  // namespace sy::console

namespace sy::console {

void fold_windows(const WindowSeries& series, std::int64_t t0_ns, std::int64_t t1_ns, const FoldOptions& options,
                  std::vector<TimelineItem>& out) {
  if (series.empty() || t1_ns <= t0_ns) return;
  const double min_ns = std::max(1.0, options.min_width_px * std::max(options.ns_per_pixel, 0.0));
  const auto group = static_cast<std::size_t>(std::max(1.0, std::ceil(min_ns / static_cast<double>(series.window_ns()))));
  const std::int64_t w = series.window_ns();
  std::size_t i = series.index_at(t0_ns);
  i -= i % group;
  for (; i < series.size(); i += group) {
    const std::int64_t start = series.begin_ns() + static_cast<std::int64_t>(i) * w;
    if (start >= t1_ns) break;
    WindowTotals t;
    const std::size_t n = std::min(group, series.size() - i);
    for (std::size_t k = 0; k < n; ++k) t.add(series[i + k]);
    if (t.empty()) continue;
    TimelineItem item;
    item.aggregate = true;
    item.start_ns = std::max(start, t0_ns);
    item.end_ns = std::min(start + static_cast<std::int64_t>(n) * w, t1_ns);
    if (item.end_ns <= item.start_ns) continue;
    item.first = 0;
    item.count = static_cast<std::size_t>(t.spans);
    item.tokens = t.tokens;
    // The kind that took the most time names the block; stalls only where nothing else ran.
    std::size_t best = static_cast<std::size_t>(telemetry::SpanKind::Stall);
    for (std::size_t k = 0; k < kKinds; ++k)
      if (k != static_cast<std::size_t>(telemetry::SpanKind::Stall) && t.kind_ns[k] > 0 &&
          (best == static_cast<std::size_t>(telemetry::SpanKind::Stall) || t.kind_ns[k] > t.kind_ns[best]))
        best = k;
    item.kind = static_cast<telemetry::SpanKind>(best);
    const std::int64_t stalled = t.stalled_ns(), busy = t.busy_ns();
    item.has_stall = stalled > 0;
    item.stall_share = busy + stalled > 0 ? static_cast<float>(static_cast<double>(stalled) / static_cast<double>(busy + stalled)) : 0.0f;
    const double length = static_cast<double>(static_cast<std::int64_t>(n) * w);
    item.busy_share = static_cast<float>(std::min(1.0, static_cast<double>(busy) / length));
    std::size_t top = 0;
    for (std::size_t r = 1; r < t.stall_ns.size(); ++r)
      if (t.stall_ns[r] > t.stall_ns[top]) top = r;
    item.stall_reason = t.stall_ns[top] > 0 ? static_cast<telemetry::StallReason>(top) : telemetry::StallReason::None;
    out.push_back(item);
  }
}

}  // namespace sy::console

namespace sy::console {
namespace {

// `after_data`: [a, b) follows the spans held, so a window that holds a's time is theirs
// already and only windows starting later are drawn (nothing past the live edge).
void fold_aggregates(const LaneDetail& lane, std::int64_t a, std::int64_t b, const FoldOptions& options,
                     std::vector<TimelineItem>& out, bool after_data = false) {
  if (b <= a) return;
  auto draw = [&](const WindowSeries& series, std::int64_t from, std::int64_t to) {
    if (after_data && from == a) {
      const std::int64_t w = series.window_ns();
      const std::int64_t edge = telemetry::window_start(from, w);
      if (edge < from) from = edge + w;
    }
    fold_windows(series, from, to, options, out);
  };
  const double min_ns = options.min_width_px * std::max(options.ns_per_pixel, 0.0);
  const bool coarse_enough = lane.coarse != nullptr && static_cast<double>(lane.coarse->window_ns()) <= min_ns;
  if (lane.fine == nullptr || coarse_enough) {
    if (lane.coarse != nullptr) draw(*lane.coarse, a, b);
    return;
  }
  const std::int64_t fa = std::clamp(lane.fine->begin_ns(), a, b), fb = std::clamp(lane.fine->end_ns(), a, b);
  if (lane.coarse != nullptr) draw(*lane.coarse, a, fa);
  draw(*lane.fine, fa, fb);
  if (lane.coarse != nullptr) draw(*lane.coarse, fb, b);
}

}  // namespace

void fold_lane_detail(const LaneDetail& lane, std::int64_t t0_ns, std::int64_t t1_ns, const FoldOptions& options,
                      std::vector<TimelineItem>& out, std::size_t max_spans) {
  if (t1_ns < t0_ns) return;
  if (lane.spans == nullptr || lane.spans->empty()) return fold_aggregates(lane, t0_ns, t1_ns, options, out);
  const LaneSpans& spans = *lane.spans;
  const std::int64_t held0 = spans[0].start_ns, held1 = spans.max_end_through(spans.size() - 1);
  const std::int64_t sa = std::max(t0_ns, held0), sb = std::min(t1_ns, held1);
  if (sb < sa) return fold_aggregates(lane, t0_ns, t1_ns, options, out);
  const std::size_t first = spans.first_ending_at_or_after(sa), last = spans.first_starting_after(sb);
  if (last > first && last - first > max_spans) return fold_aggregates(lane, t0_ns, t1_ns, options, out);
  fold_aggregates(lane, t0_ns, sa, options, out);
  fold_lane(spans, sa, sb, options, out);
  fold_aggregates(lane, sb, t1_ns, options, out, /*after_data=*/true);
}

}  // namespace sy::console
