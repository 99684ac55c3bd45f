#include "telemetry/flight_recorder.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

namespace sy::telemetry {

namespace {

// When a JSON object happened: its t_ns (control) or t_end_ns (summary); unknown: never evicted early.
std::int64_t json_time(const std::string& text) {
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (!doc.is_object()) return std::numeric_limits<std::int64_t>::max();
  for (const char* key : {"t_ns", "t_end_ns"})
    if (doc.contains(key) && doc[key].is_number_integer()) return doc[key].get<std::int64_t>();
  return std::numeric_limits<std::int64_t>::max();
}

}  // namespace

StatusOr<std::unique_ptr<FlightRecorder>> FlightRecorder::create(FlightRecorderOptions options) {
  if (options.keep_ns < 0) return Status::Error("flight recorder: the time to keep must not be negative");
  if (options.keep_ns == 0 && options.max_bytes == 0)
    return Status::Error("flight recorder: give how long (minutes) or how much (megabytes) to keep");
  options.block_records = std::max<std::uint32_t>(options.block_records, 1);
  return std::unique_ptr<FlightRecorder>(new FlightRecorder(options));
}

FlightRecorder::FlightRecorder(FlightRecorderOptions options) : options_(options) {
  compressor_ = std::thread([this] { compress_loop(); });
}

FlightRecorder::~FlightRecorder() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_.notify_all();
  if (compressor_.joinable()) compressor_.join();
}

void FlightRecorder::queue(RawBlock raw, std::unique_lock<std::mutex>& lock) {
  done_.wait(lock, [&] { return waiting_.size() < kMaxWaiting; });
  waiting_.push_back(std::move(raw));
  work_.notify_one();
}

void FlightRecorder::compress_loop() {
  std::unique_lock lock(mu_);
  while (true) {
    work_.wait(lock, [&] { return stopping_ || !waiting_.empty(); });
    if (waiting_.empty()) return;  // stopping, and everything compressed
    RawBlock raw = std::move(waiting_.front());
    waiting_.pop_front();
    compressing_ = true;
    lock.unlock();
    const bool spans = !raw.spans.empty();
    FlightSnapshot::Block b{spans, spans ? encode_span_block(raw.device, raw.spans, options_.codec, options_.codec_level)
                                         : encode_queue_block(raw.device, raw.queues, options_.codec, options_.codec_level)};
    lock.lock();
    block_bytes_ += b.block.data.size();
    block_records_ += b.block.count;
    blocks_.push_back(std::move(b));
    compressing_ = false;
    evict();
    done_.notify_all();
  }
}

void FlightRecorder::wait_compressed(std::unique_lock<std::mutex>& lock) const {
  done_.wait(lock, [&] { return waiting_.empty() && !compressing_; });
}

void FlightRecorder::seen(std::int64_t t) {
  newest_ns_ = any_ ? std::max(newest_ns_, t) : t;
  any_ = true;
}

void FlightRecorder::add(std::span<const Span> records) {
  std::unique_lock lock(mu_);
  for (const Span& s : records) {
    seen(s.end_ns);
    auto& p = pending_spans_[s.device];
    p.push_back(s);
    if (p.size() >= options_.block_records) {
      RawBlock raw{s.device, std::move(p), {}};
      p = {};
      queue(std::move(raw), lock);
    }
  }
  evict();
}

void FlightRecorder::add(std::span<const QueueSample> records) {
  std::unique_lock lock(mu_);
  for (const QueueSample& q : records) {
    seen(q.t_ns);
    auto& p = pending_queues_[q.device];
    p.push_back(q);
    if (p.size() >= options_.block_records) {
      RawBlock raw{q.device, {}, std::move(p)};
      p = {};
      queue(std::move(raw), lock);
    }
  }
  evict();
}

void FlightRecorder::add(std::span<const ExpertLoad> records) {
  std::lock_guard lock(mu_);
  for (const ExpertLoad& l : records) {
    seen(l.window_end_ns);
    loads_.push_back(l);
  }
  evict();
}

void FlightRecorder::add(std::span<const RequestEvent> records) {
  std::lock_guard lock(mu_);
  for (const RequestEvent& r : records) {
    seen(r.t_ns);
    requests_.push_back(r);
  }
  evict();
}

void FlightRecorder::add_json(Topic topic, const std::string& object_json) {
  if (topic != Topic::Control && topic != Topic::Summary) return;
  std::lock_guard lock(mu_);
  json_.emplace_back(json_time(object_json), std::pair(topic, object_json));
  evict();
}

// Blocks leave in the order they were made (about time order; one device's block may outlive
// a newer one of another by a block's length). The small records follow the oldest block kept.
void FlightRecorder::evict() {
  auto drop_front = [&] {
    block_bytes_ -= blocks_.front().block.data.size();
    block_records_ -= blocks_.front().block.count;
    evicted_ += blocks_.front().block.count;
    blocks_.pop_front();
  };
  std::int64_t horizon = std::numeric_limits<std::int64_t>::min();
  if (options_.keep_ns > 0 && any_ && newest_ns_ > std::numeric_limits<std::int64_t>::min() + options_.keep_ns)
    horizon = newest_ns_ - options_.keep_ns;
  while (!blocks_.empty() && blocks_.front().block.end_ns < horizon) drop_front();
  if (options_.max_bytes > 0) {
    while (!blocks_.empty() && block_bytes_ > options_.max_bytes) {
      drop_front();
      if (!blocks_.empty()) horizon = std::max(horizon, blocks_.front().block.start_ns);
    }
  }
  while (!loads_.empty() && loads_.front().window_end_ns < horizon) {
    loads_.pop_front();
    ++evicted_;
  }
  while (!requests_.empty() && requests_.front().t_ns < horizon) {
    requests_.pop_front();
    ++evicted_;
  }
  while (!json_.empty() && json_.front().first < horizon) {
    json_.pop_front();
    ++evicted_;
  }
}

FlightSnapshot FlightRecorder::snapshot() const {
  std::unique_lock lock(mu_);
  wait_compressed(lock);
  FlightSnapshot s;
  s.blocks.assign(blocks_.begin(), blocks_.end());
  for (const auto& [device, p] : pending_spans_) s.spans.insert(s.spans.end(), p.begin(), p.end());
  for (const auto& [device, p] : pending_queues_) s.queues.insert(s.queues.end(), p.begin(), p.end());
  s.loads.assign(loads_.begin(), loads_.end());
  s.requests.assign(requests_.begin(), requests_.end());
  for (const auto& [t, item] : json_) s.json.push_back(item);
  s.horizon_ns = options_.keep_ns > 0 && any_ ? newest_ns_ - options_.keep_ns : std::numeric_limits<std::int64_t>::min();
  return s;
}

FlightRecorderStats FlightRecorder::stats() const {
  std::unique_lock lock(mu_);
  wait_compressed(lock);
  FlightRecorderStats st;
  st.bytes = block_bytes_;
  st.records = block_records_ + loads_.size() + requests_.size() + json_.size();
  for (const auto& [device, p] : pending_spans_) {
    st.records += p.size();
    st.bytes += p.size() * sizeof(Span);
  }
  for (const auto& [device, p] : pending_queues_) {
    st.records += p.size();
    st.bytes += p.size() * sizeof(QueueSample);
  }
  st.bytes += loads_.size() * sizeof(ExpertLoad) + requests_.size() * sizeof(RequestEvent);
  for (const auto& [t, item] : json_) st.bytes += item.second.size();
  st.evicted = evicted_;
  st.newest_ns = newest_ns_;
  st.oldest_ns = newest_ns_;
  if (!blocks_.empty()) st.oldest_ns = std::min(st.oldest_ns, blocks_.front().block.start_ns);
  for (const auto& [device, p] : pending_spans_)
    for (const Span& s : p) st.oldest_ns = std::min(st.oldest_ns, s.start_ns);
  return st;
}

Status write_flight_snapshot(const FlightSnapshot& snapshot, RecorderOptions options) {
  options.format = TraceFormat::Blocks;
  options.max_queued_records = std::numeric_limits<std::size_t>::max();  // nothing may be dropped
  options.metadata["flight_recorder"] = "1";
  auto opened = TraceRecorder::open(std::move(options));
  if (!opened.ok()) return opened.status();
  TraceRecorder& r = **opened;
  const std::int64_t horizon = snapshot.horizon_ns;
  std::vector<Span> spans;
  std::vector<QueueSample> queues;
  // Blocks in time order across devices, so that the recording's per-second windows
  // (SPAN_WINDOWS, queue integrals included) see the run roughly as it happened.
  std::vector<std::size_t> order(snapshot.blocks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return snapshot.blocks[x].block.start_ns < snapshot.blocks[y].block.start_ns;
  });
  for (std::size_t index : order) {
    const FlightSnapshot::Block& held = snapshot.blocks[index];
    const EncodedBlock& b = held.block;
    // Blocks are decoded and written again: a dump is rare, and the file's blocks then follow
    // the recorder's rules (per device, by size) like any recording's.
    if (held.spans) {
      spans.clear();
      if (Status s = decode_span_block(b.device, b.start_ns, b.count, b.codec, b.data, b.raw_bytes, spans); !s.ok())
        return s;
      std::erase_if(spans, [&](const Span& x) { return x.end_ns < horizon; });
      r.add(std::span<const Span>(spans));
    } else {
      queues.clear();
      if (Status s = decode_queue_block(b.device, b.start_ns, b.count, b.codec, b.data, b.raw_bytes, queues); !s.ok())
        return s;
      std::erase_if(queues, [&](const QueueSample& x) { return x.t_ns < horizon; });
      r.add(std::span<const QueueSample>(queues));
    }
  }
  spans = snapshot.spans;
  std::erase_if(spans, [&](const Span& x) { return x.end_ns < horizon; });
  r.add(std::span<const Span>(spans));
  queues = snapshot.queues;
  std::erase_if(queues, [&](const QueueSample& x) { return x.t_ns < horizon; });
  r.add(std::span<const QueueSample>(queues));
  r.add(std::span<const ExpertLoad>(snapshot.loads));
  r.add(std::span<const RequestEvent>(snapshot.requests));
  for (const auto& [topic, text] : snapshot.json) r.add_json(topic, text);
  return r.stop();
}

}  // namespace sy::telemetry
