#include "telemetry/telemetry_hub.h"

#include <chrono>
#include <random>

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "telemetry/endpoint.h"
#include "telemetry/zap_handler.h"
#include "telemetry/zmq_curve.h"

namespace sy::telemetry {

namespace {

std::size_t topic_index(Topic t) { return static_cast<std::size_t>(t); }

}  // namespace

std::uint64_t random_run_id() {
  std::random_device rd;
  std::uint64_t id = 0;
  while (id == 0) id = (std::uint64_t{rd()} << 32) ^ rd();
  return id;
}

// Everything the publisher thread owns: the socket and the staging buffers it batches into.
struct TelemetryHub::Publisher {
  zmq::context_t context{1};
  std::unique_ptr<ZapHandler> zap;
  zmq::socket_t socket;
  bool has_socket = false;
  std::uint64_t sequence[std::size(kAllTopics)] = {};
  std::vector<Producer*> producers;
  std::vector<Span> spans;
  std::vector<QueueSample> queues;
  std::vector<ExpertLoad> loads;
  std::vector<RequestEvent> requests;
  std::vector<std::string> json[std::size(kAllTopics)];
};

StatusOr<std::unique_ptr<TelemetryHub>> TelemetryHub::start(HubOptions options) {
  std::unique_ptr<TelemetryHub> hub(new TelemetryHub());
  if (options.max_records_per_message == 0) options.max_records_per_message = 1;
  hub->run_id_ = options.run_id != 0 ? options.run_id : random_run_id();
  hub->publisher_ = std::make_unique<Publisher>();
  Publisher& p = *hub->publisher_;
  if (!options.endpoint.empty()) {
    const std::string what = "telemetry endpoint " + options.endpoint;
    try {
      if (options.curve) {
        if (Status s = validate(*options.curve); !s.ok()) return Status::Error(what + ": " + s.message());
        auto zap = ZapHandler::start(p.context, options.curve->authorized_clients);
        if (!zap.ok()) return Status::Error(what + ": " + zap.status().message());
        p.zap = std::move(zap).value();
      }
      p.socket = zmq::socket_t(p.context, zmq::socket_type::pub);
      // Long enough for the last batches to leave at shutdown, short enough never to hang it.
      p.socket.set(zmq::sockopt::linger, 250);
      p.socket.set(zmq::sockopt::sndhwm, options.send_high_water_mark);
      if (options.curve) set_curve_server(p.socket, *options.curve);
      p.socket.bind(zmq_bind_endpoint(options.endpoint));
      hub->endpoint_ = p.socket.get(zmq::sockopt::last_endpoint);
      p.has_socket = true;
    } catch (const zmq::error_t& e) {
      return Status::Error("cannot listen on " + what + ": " + e.what());
    }
  }
  p.spans.resize(options.max_records_per_message);
  p.queues.resize(options.max_records_per_message);
  p.loads.resize(options.max_records_per_message);
  p.requests.resize(options.max_records_per_message);
  hub->options_ = std::move(options);
  hub->thread_ = std::thread([h = hub.get()] { h->run(); });
  return hub;
}

TelemetryHub::~TelemetryHub() {
  {
    std::lock_guard lock(cycle_mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();  // the thread runs a last cycle before it ends
  {
    std::lock_guard lock(dumper_mutex_);
    if (dumper_.joinable()) dumper_.join();
  }
  {
    std::lock_guard lock(recorder_mutex_);
    if (recorder_) (void)recorder_->stop();
    recorder_.reset();
  }
  if (publisher_) {
    publisher_->socket.close();
    publisher_->zap.reset();
  }
}

Producer& TelemetryHub::add_producer(std::string name) {
  std::lock_guard lock(producers_mutex_);
  producers_.push_back(std::make_unique<Producer>(std::move(name), options_.rings));
  return *producers_.back();
}

Status TelemetryHub::publish_json(Topic topic, std::string_view object_json) {
  if (!topic_is_json(topic)) {
    return Status::Error("publish_json: topic '" + std::string(topic_name(topic)) + "' carries binary records");
  }
  // Checked here, where the caller can hear about it, so that one bad object never makes a
  // whole batch undecodable for every subscriber.
  const nlohmann::json doc = nlohmann::json::parse(object_json, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return Status::Error("publish_json(" + std::string(topic_name(topic)) + "): text is not one JSON object");
  }
  std::lock_guard lock(json_mutex_);
  auto& pending = pending_json_[topic_index(topic)];
  if (pending.size() >= options_.max_pending_json) {
    json_dropped_[topic_index(topic)]++;
    return Status::Ok();  // counted like a full ring: the publisher is behind, not the caller wrong
  }
  pending.emplace_back(object_json);
  return Status::Ok();
}

void TelemetryHub::flush() {
  std::unique_lock lock(cycle_mutex_);
  const std::uint64_t target = cycles_started_ + 1;
  flush_requested_ = true;
  wake_.notify_all();
  cycle_done_.wait(lock, [&] { return cycles_completed_ >= target || publisher_exited_; });
}

TopicCounters TelemetryHub::counters(Topic topic) const {
  const std::size_t i = topic_index(topic);
  TopicCounters c;
  c.messages = messages_[i].load();
  c.records = records_[i].load();
  c.dropped = json_dropped_[i].load();
  std::lock_guard lock(producers_mutex_);
  for (const auto& p : producers_) {
    switch (topic) {
      case Topic::Spans: c.dropped += p->spans_.dropped(); break;
      case Topic::Queues: c.dropped += p->queues_.dropped(); break;
      case Topic::ExpertLoad: c.dropped += p->loads_.dropped(); break;
      case Topic::Requests: c.dropped += p->requests_.dropped(); break;
      default: break;
    }
  }
  return c;
}

std::uint64_t TelemetryHub::dropped_records() const {
  std::uint64_t total = 0;
  for (Topic t : kAllTopics) total += counters(t).dropped;
  return total;
}

Status TelemetryHub::start_recording(RecorderOptions options) {
  {
    std::lock_guard lock(recorder_mutex_);
    if (recorder_) {
      return Status::Error("a recording to " + recorder_->path().string() + " is running; stop it first");
    }
  }
  options.metadata.try_emplace("run_id", std::to_string(run_id_));
  // Opening creates the file and its schema: done outside the lock so the publisher never waits on it.
  auto recorder = TraceRecorder::open(std::move(options));
  if (!recorder.ok()) return recorder.status();
  std::lock_guard lock(recorder_mutex_);
  if (recorder_) return Status::Error("a recording to " + recorder_->path().string() + " is running; stop it first");
  recorder_ = std::move(recorder).value();
  return Status::Ok();
}

Status TelemetryHub::stop_recording(const std::map<std::string, std::string>& final_metadata) {
  flush();
  std::unique_ptr<TraceRecorder> recorder;
  {
    std::lock_guard lock(recorder_mutex_);
    recorder = std::move(recorder_);
  }
  if (!recorder) return Status::Error("no recording is running");
  return recorder->stop(final_metadata);
}

std::optional<std::filesystem::path> TelemetryHub::recording_path() const {
  std::lock_guard lock(recorder_mutex_);
  if (!recorder_) return std::nullopt;
  return recorder_->path();
}

std::optional<RecorderStats> TelemetryHub::recording_stats() const {
  std::lock_guard lock(recorder_mutex_);
  if (!recorder_) return std::nullopt;
  return recorder_->stats();
}

Status TelemetryHub::start_ring(FlightRecorderOptions options, RingTrigger trigger, RecorderOptions dump_to,
                                std::function<void(const RingDumpEvent&)> on_trigger) {
  auto ring = FlightRecorder::create(options);
  if (!ring.ok()) return ring.status();
  dump_to.metadata.try_emplace("run_id", std::to_string(run_id_));
  std::lock_guard lock(recorder_mutex_);
  if (ring_) return Status::Error("a flight recorder runs already; stop it first");
  ring_ = std::move(ring).value();
  ring_trigger_ = trigger;
  ring_dump_to_ = std::move(dump_to);
  ring_on_trigger_ = std::move(on_trigger);
  return Status::Ok();
}

Status TelemetryHub::dump_ring(RecorderOptions options) {
  flush();  // what the rings hold now belongs to the dump
  FlightSnapshot snapshot;
  {
    std::lock_guard lock(recorder_mutex_);
    if (!ring_) return Status::Error("no flight recorder is running (record_start with \"mode\":\"ring\")");
    snapshot = ring_->snapshot();
  }
  options.metadata.try_emplace("run_id", std::to_string(run_id_));
  return write_flight_snapshot(snapshot, std::move(options));
}

Status TelemetryHub::stop_ring() {
  std::lock_guard lock(recorder_mutex_);
  if (!ring_) return Status::Error("no flight recorder is running");
  ring_.reset();
  ring_trigger_ = {};
  return Status::Ok();
}

std::optional<FlightRecorderStats> TelemetryHub::ring_stats() const {
  std::lock_guard lock(recorder_mutex_);
  if (!ring_) return std::nullopt;
  return ring_->stats();
}

std::optional<std::filesystem::path> TelemetryHub::ring_path() const {
  std::lock_guard lock(recorder_mutex_);
  if (!ring_) return std::nullopt;
  return ring_dump_to_.path;
}

// Publisher thread, recorder_mutex_ held. `json` is a summary or a control event.
void TelemetryHub::check_trigger(Topic topic, const std::string& json) {
  if (!ring_ || !ring_trigger_.armed()) return;
  if (topic == Topic::Control && !ring_trigger_.rank_lost) return;
  const auto doc = nlohmann::json::parse(json, nullptr, false);
  if (!doc.is_object()) return;
  std::string reason;
  if (topic == Topic::Control) {
    if (doc.value("cmd", "") != "rank_lost") return;
    const auto& why = doc.contains("reason") && doc["reason"].is_string() ? doc["reason"].get<std::string>() : "";
    reason = "rank_lost: " + why;
  }
  if (ring_trigger_.itl_p99_ms && doc.contains("itl_ms") && doc["itl_ms"].is_object() &&
      doc["itl_ms"].contains("p99") && doc["itl_ms"]["p99"].is_number()) {
    const double p99 = doc["itl_ms"]["p99"].get<double>();
    if (p99 > *ring_trigger_.itl_p99_ms)
      reason = "itl_p99_ms " + std::to_string(p99) + " > " + std::to_string(*ring_trigger_.itl_p99_ms);
  }
  if (reason.empty() && ring_trigger_.stall_fraction && doc.contains("devices") && doc["devices"].is_array()) {
    for (const auto& d : doc["devices"]) {
      if (!d.is_object() || !d.contains("stall") || !d["stall"].is_object()) continue;
      double stalled = 0;
      for (const auto& [k, v] : d["stall"].items())
        if (v.is_number()) stalled += v.get<double>();
      if (stalled > *ring_trigger_.stall_fraction) {
        reason = "stall_fraction " + std::to_string(stalled) + " > " + std::to_string(*ring_trigger_.stall_fraction) +
                 " on device " + (d.contains("name") && d["name"].is_string() ? d["name"].get<std::string>() : "?");
        break;
      }
    }
  }
  if (reason.empty()) return;
  ring_trigger_ = {};  // fires once
  // The summary closes its window: what the ring holds now is the time before the incident.
  FlightSnapshot snapshot = ring_->snapshot();
  RecorderOptions to = ring_dump_to_;
  to.metadata["trigger"] = reason;
  auto notify = ring_on_trigger_;
  std::lock_guard lock(dumper_mutex_);
  if (dumper_.joinable()) dumper_.join();
  dumper_ = std::thread([snapshot = std::move(snapshot), to = std::move(to), notify, reason]() mutable {
    RingDumpEvent event{reason, to.path, Status::Ok()};
    event.status = write_flight_snapshot(snapshot, std::move(to));
    if (notify) notify(event);
  });
}

void TelemetryHub::run() {
  std::unique_lock lock(cycle_mutex_);
  while (true) {
    wake_.wait_for(lock, options_.drain_interval, [&] { return stopping_ || flush_requested_; });
    const bool last = stopping_;
    flush_requested_ = false;
    ++cycles_started_;
    lock.unlock();
    cycle();
    lock.lock();
    ++cycles_completed_;
    if (last) publisher_exited_ = true;
    cycle_done_.notify_all();
    if (last) return;
  }
}

namespace {

// Sends one message; PUB never blocks (at the high-water mark it drops for that subscriber).
void send_batch(zmq::socket_t& socket, const EncodedBatch& batch) {
  try {
    socket.send(zmq::buffer(batch.topic), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket.send(zmq::buffer(batch.header), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    socket.send(zmq::buffer(batch.payload), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    // Only a closing context fails here; the sequence numbers tell subscribers what they missed.
  }
}

}  // namespace

void TelemetryHub::cycle() {
  Publisher& p = *publisher_;
  {
    std::lock_guard lock(producers_mutex_);
    p.producers.clear();
    for (const auto& prod : producers_) p.producers.push_back(prod.get());
  }
  {
    std::lock_guard lock(json_mutex_);
    for (std::size_t i = 0; i < std::size(kAllTopics); ++i) std::swap(p.json[i], pending_json_[i]);
  }

  std::lock_guard recorder_lock(recorder_mutex_);
  TraceRecorder* recorder = recorder_.get();
  FlightRecorder* flight = ring_.get();

  auto publish = [&](Topic topic, const auto* records, std::uint32_t count) {
    const std::size_t i = topic_index(topic);
    if (p.has_socket) send_batch(p.socket, encode(topic, p.sequence[i], run_id_, records, count));
    ++p.sequence[i];
    messages_[i]++;
    records_[i] += count;
    if (flight) flight->add(std::span(records, count));
    if (recorder) recorder->add(std::span(records, count));
  };
  // Fills a batch from every producer's ring of one kind, sending each time it is full.
  auto drain = [&](Topic topic, auto ring_of, auto& buffer) {
    const std::size_t cap = buffer.size();
    std::size_t fill = 0;
    for (Producer* prod : p.producers) {
      auto& ring = ring_of(*prod);
      while (std::size_t n = ring.pop(buffer.data() + fill, cap - fill)) {
        fill += n;
        if (fill == cap) {
          publish(topic, buffer.data(), static_cast<std::uint32_t>(fill));
          fill = 0;
        }
      }
    }
    if (fill != 0) publish(topic, buffer.data(), static_cast<std::uint32_t>(fill));
  };
  drain(Topic::Spans, [](Producer& x) -> auto& { return x.spans_; }, p.spans);
  drain(Topic::Queues, [](Producer& x) -> auto& { return x.queues_; }, p.queues);
  drain(Topic::ExpertLoad, [](Producer& x) -> auto& { return x.loads_; }, p.loads);
  drain(Topic::Requests, [](Producer& x) -> auto& { return x.requests_; }, p.requests);

  for (Topic topic : kAllTopics) {
    auto& objects = p.json[topic_index(topic)];
    const std::size_t i = topic_index(topic);
    for (std::size_t begin = 0; begin < objects.size(); begin += options_.max_records_per_message) {
      const std::size_t end = std::min<std::size_t>(objects.size(), begin + options_.max_records_per_message);
      std::string array = "[";
      for (std::size_t k = begin; k < end; ++k) {
        if (k != begin) array += ',';
        array += objects[k];
      }
      array += ']';
      const auto count = static_cast<std::uint32_t>(end - begin);
      if (p.has_socket) send_batch(p.socket, encode_json(topic, p.sequence[i], run_id_, std::move(array), count));
      ++p.sequence[i];
      messages_[i]++;
      records_[i] += count;
      if (flight && topic != Topic::Meta) {
        for (std::size_t k = begin; k < end; ++k) flight->add_json(topic, objects[k]);
      }
      if (topic == Topic::Summary || topic == Topic::Control) {
        for (std::size_t k = begin; k < end; ++k) check_trigger(topic, objects[k]);
      }
      if (recorder && topic != Topic::Meta) {
        for (std::size_t k = begin; k < end; ++k) recorder->add_json(topic, std::move(objects[k]));
      }
    }
    objects.clear();
  }
}

}  // namespace sy::telemetry
