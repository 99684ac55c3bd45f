#include "engine/serving/telemetry_bridge.h"

#include <algorithm>
#include <chrono>

#include "engine/runtime/runtime_policy.h"

namespace sy {
namespace {

namespace tm = telemetry;

tm::SpanKind span_kind(LayerKind kind) {
  switch (kind) {
    case LayerKind::Attention: return tm::SpanKind::Attention;
    case LayerKind::Expert: return tm::SpanKind::Expert;
    case LayerKind::Sampler: return tm::SpanKind::Sampler;
  }
  return tm::SpanKind::Attention;
}

tm::LayerKind layer_kind(LayerKind kind) {
  switch (kind) {
    case LayerKind::Attention: return tm::LayerKind::Attention;
    case LayerKind::Expert: return tm::LayerKind::Expert;
    case LayerKind::Sampler: return tm::LayerKind::Sampler;
  }
  return tm::LayerKind::Attention;
}

tm::StallReason stall_reason(StallReason reason) {
  switch (reason) {
    case StallReason::QueueEmpty: return tm::StallReason::QueueEmpty;
    case StallReason::Barrier: return tm::StallReason::Barrier;
    case StallReason::Transfer: return tm::StallReason::Transfer;
    case StallReason::Weights: return tm::StallReason::Weights;
  }
  return tm::StallReason::None;
}

std::int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TelemetryBridge::TelemetryBridge(Deployment& deployment, tm::TelemetryHub& hub, tm::ServingMetrics* prometheus,
                                 RunInfo info, Options options)
    : d_(deployment),
      hub_(hub),
      prometheus_(prometheus),
      info_(std::move(info)),
      options_(options),
      alive_(std::make_shared<bool>(true)) {
  const Topology& topo = d_.cluster().topology();
  for (std::int32_t dev = 0; dev < topo.num_devices; ++dev) devices_.push_back(&hub_.add_producer(topo.device_names[dev]));
  requests_ = &hub_.add_producer("coordinator");
  // On a virtual clock a wait for the publisher changes no simulated time, so an unpaced run
  // waits for it rather than losing records when the recorder falls behind (a wall clock's
  // workers never wait for telemetry).
  if (d_.options().clock == Clock::Virtual) {
    for (telemetry::Producer* p : devices_) p->wait_when_full(kVirtualClockWait);
    requests_->wait_when_full(kVirtualClockWait);
  }
  if (prometheus_) prometheus_->set_device_names(topo.device_names);
  last_nonzero_.resize(static_cast<std::size_t>(topo.num_devices));
  window_.resize(static_cast<std::size_t>(topo.num_devices));
  const auto cells = static_cast<std::size_t>(topo.num_blocks) * static_cast<std::size_t>(topo.num_experts) *
                     static_cast<std::size_t>(topo.num_devices);
  load_window_.assign(cells, 0);
  summary_load_.assign(cells, 0);
  last_summary_load_.assign(cells, 0);

  EventLoop& loop = d_.loop();
  const std::int64_t now = loop.now();
  // The wall time that run time `now` corresponds to.
  wall_origin_unix_ns_ = unix_now_ns() - now;
  load_window_start_ = summary_start_ = now;
  d_.observers().add(this, this);
  // The adaptive policy's switches are control events nobody sent, with their reason.
  d_.coordinator().on_adaptive_switch([this](const Coordinator::AdaptiveSwitch& sw) {
    const auto brief = [](const RuntimePolicy& p) {
      nlohmann::json j = {{"name", policy_name(p.kind)}};
      if (p.kind == PolicyKind::PingPong) j["microbatches"] = p.microbatches;
      return j;
    };
    publish_control({{"t_ns", sw.t_ns},
                     {"cmd", "adaptive_switch"},
                     {"request", nullptr},
                     {"old", brief(sw.from)},
                     {"new", brief(sw.to)},
                     {"ok", true},
                     {"error", nullptr},
                     {"reason", sw.reason}});
  });

  // Periodic samples on the loop; each reposts itself while the bridge lives.
  struct Ticker {
    EventLoop* loop;
    std::weak_ptr<bool> alive;
    std::int64_t period;
    std::function<void()> fn;
    void operator()() const {
      if (alive.expired()) return;
      fn();
      loop->post(loop->now() + period, *this);
    }
  };
  auto every = [&](std::int64_t period, std::function<void()> fn) {
    loop.post(loop.now() + period, Ticker{&loop, alive_, period, std::move(fn)});
  };
  every(options_.queue_sample_ns, [this] { sample_queues(); });
  every(options_.load_window_ns, [this] { close_load_window(); });
  every(options_.summary_window_ns, [this] { close_summary_window(); });
  publish_meta();
}

TelemetryBridge::~TelemetryBridge() {
  d_.coordinator().on_adaptive_switch({});
  d_.observers().remove(this, this);
  alive_.reset();
}

TelemetryBridge::DeviceWindow& TelemetryBridge::compute_span(tm::SpanKind kind, std::int32_t device, std::int32_t block,
                                                              std::int32_t index, std::int32_t group, std::int64_t tokens,
                                                              std::int64_t start_ns, std::int64_t end_ns) {
  tm::Span s;
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  s.tokens = tokens;
  s.device = device;
  s.block = block;
  s.index = index;
  s.microbatch = group;
  s.lane = tm::Lane::Compute;
  s.kind = kind;
  producer(device).span(s);
  DeviceWindow& w = window_[static_cast<std::size_t>(device)];
  if (end_ns > summary_start_) w.busy_ns += end_ns - std::max(start_ns, summary_start_);
  return w;
}

void TelemetryBridge::on_execution(std::int32_t device, LayerKind kind, std::int32_t block, std::int32_t index,
                                   std::int32_t group, std::int64_t tokens, std::int64_t start_ns,
                                   std::int64_t end_ns) {
  DeviceWindow& w = compute_span(span_kind(kind), device, kind == LayerKind::Sampler ? -1 : block, index, group, tokens,
                                 start_ns, end_ns);
  ++w.executions;
  w.rows += tokens;
}

void TelemetryBridge::on_shared_expert(std::int32_t device, std::int32_t block, std::int32_t group,
                                       std::int64_t tokens, std::int64_t start_ns, std::int64_t end_ns) {
  // Busy, not an execution: its rows were counted by the attention execution (as the metrics'
  // device table counts them).
  compute_span(tm::SpanKind::SharedExpert, device, block, -1, group, tokens, start_ns, end_ns);
}

void TelemetryBridge::on_merge(std::int32_t device, std::int32_t block, std::int64_t tokens, std::int64_t start_ns,
                               std::int64_t end_ns) {
  compute_span(tm::SpanKind::Merge, device, block, -1, -1, tokens, start_ns, end_ns);  // busy, not an execution
}

void TelemetryBridge::on_stall(std::int32_t device, StallReason reason, std::int64_t start_ns, std::int64_t end_ns) {
  tm::Span s;
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  s.device = device;
  s.lane = tm::Lane::Compute;
  s.kind = tm::SpanKind::Stall;
  s.stall_reason = stall_reason(reason);
  producer(device).span(s);
  if (end_ns > summary_start_)
    window_[static_cast<std::size_t>(device)].stall_ns[stall_reason_index(reason)] += end_ns - std::max(start_ns, summary_start_);
}

void TelemetryBridge::on_transfer(std::int32_t src, std::int32_t dst, std::int64_t tokens, std::int64_t /*bytes*/,
                                  std::int64_t start_ns, std::int64_t end_ns) {
  tm::Span s;
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  s.tokens = tokens;
  s.kind = tm::SpanKind::Transfer;
  s.device = src;
  s.peer = dst;
  s.lane = tm::Lane::Send;
  // One record per transfer: consumers show it on the destination's receive lane too (the
  // protocol says so), which halves the most frequent record of the stream.
  producer(src).span(s);
  DeviceWindow& w = window_[static_cast<std::size_t>(src)];
  ++w.transfers;
  w.transfer_rows += tokens;
}

void TelemetryBridge::on_queue_wait(std::int32_t device, const LayerId& /*queue*/, std::int64_t /*tokens*/,
                                    std::int64_t waited_ns, std::int64_t /*at_ns*/) {
  DeviceWindow& w = window_[static_cast<std::size_t>(device)];
  ++w.queue_takes;
  w.queue_wait_ns += waited_ns;
  w.queue_wait_max_ns = std::max(w.queue_wait_max_ns, waited_ns);
}

void TelemetryBridge::on_weight_fetch(std::int32_t device, std::int32_t source, std::int32_t block,
                                      std::int32_t expert, std::int64_t /*bytes*/, std::int64_t start_ns,
                                      std::int64_t end_ns) {
  // On the receiving device's receive lane: the copy runs beside its executions (a copy engine
  // on a GPU), so it does not count as busy compute time.
  tm::Span s;
  s.start_ns = start_ns;
  s.end_ns = end_ns;
  s.kind = tm::SpanKind::WeightFetch;
  s.device = device;
  s.peer = source;
  s.block = block;
  s.index = expert;
  s.lane = tm::Lane::Receive;
  producer(device).span(s);
}

void TelemetryBridge::on_routed(std::int32_t block, std::int32_t expert, std::int32_t device, std::int64_t tokens,
                                std::int64_t /*at_ns*/) {
  const Topology& topo = d_.cluster().topology();
  const auto cell = (static_cast<std::size_t>(block) * static_cast<std::size_t>(topo.num_experts) +
                     static_cast<std::size_t>(expert)) *
                        static_cast<std::size_t>(topo.num_devices) +
                    static_cast<std::size_t>(device);
  load_window_[cell] += tokens;
  summary_load_[cell] += tokens;
}

void TelemetryBridge::on_request(const RequestUpdate& u) {
  tm::RequestEvent e;
  e.t_ns = u.t_ns;
  e.request_id = u.id;
  e.tokens_in = u.tokens_in;
  e.tokens_out = u.tokens_out;
  e.rank = u.rank;
  switch (u.phase) {
    case RequestPhase::Arrival:
      e.phase = tm::RequestPhase::Arrival;
      arrival_ns_[u.id] = u.t_ns;
      break;
    case RequestPhase::Admitted: e.phase = tm::RequestPhase::Admitted; break;
    case RequestPhase::Token: {
      // Every token counts and has a latency; only the first is a lifecycle event.
      ++window_tokens_;
      if (prometheus_) prometheus_->add_generated_tokens(1);
      if (const auto last = last_token_ns_.find(u.id); last != last_token_ns_.end()) {
        const double seconds = static_cast<double>(u.t_ns - last->second) * 1e-9;
        itl_ns_.push_back(seconds * 1e9);
        if (prometheus_) prometheus_->observe_inter_token_latency(seconds);
      } else if (const auto a = arrival_ns_.find(u.id); a != arrival_ns_.end()) {
        const double seconds = static_cast<double>(u.t_ns - a->second) * 1e-9;
        ttft_ns_.push_back(seconds * 1e9);
        if (prometheus_) prometheus_->observe_time_to_first_token(seconds);
      }
      last_token_ns_[u.id] = u.t_ns;
      if (u.tokens_out != 1) return;
      e.phase = tm::RequestPhase::FirstToken;
      break;
    }
    case RequestPhase::Finished:
    case RequestPhase::Rejected:
      e.phase = u.phase == RequestPhase::Finished ? tm::RequestPhase::Finished : tm::RequestPhase::Rejected;
      ++(u.phase == RequestPhase::Finished ? window_finished_ : window_rejected_);
      if (prometheus_ && u.phase == RequestPhase::Rejected) prometheus_->add_rejected(reject_reason_name(u.reject_reason));
      if (prometheus_ && u.phase == RequestPhase::Finished) {
        if (const auto a = arrival_ns_.find(u.id); a != arrival_ns_.end())
          prometheus_->observe_end_to_end_latency(static_cast<double>(u.t_ns - a->second) * 1e-9);
      }
      last_token_ns_.erase(u.id);
      arrival_ns_.erase(u.id);
      break;
  }
  requests_->request(e);
}

void TelemetryBridge::sample_queues() {
  const std::int64_t now = d_.loop().now();
  Cluster& cluster = d_.cluster();
  for (std::int32_t dev = 0; dev < cluster.num_devices(); ++dev) {
    if (!cluster.local(dev)) continue;  // another process runs it
    const auto depths = cluster.worker(dev).queue_depths();
    auto& previous = last_nonzero_[static_cast<std::size_t>(dev)];
    std::vector<LayerId> current;
    current.reserve(depths.size());
    std::int64_t total = 0;
    auto emit = [&](const LayerId& layer, std::int64_t tokens, std::int64_t oldest) {
      tm::QueueSample q;
      q.t_ns = now;
      q.depth_tokens = tokens;
      q.oldest_age_ns = tokens > 0 ? now - oldest : 0;
      q.device = dev;
      q.block = layer.block;
      q.index = layer.index;
      q.layer = layer_kind(layer.kind);
      producer(dev).queue(q);
    };
    for (const Worker::QueueDepth& q : depths) {
      emit(q.layer, q.tokens, q.oldest_ns);
      current.push_back(q.layer);
      total += q.tokens;
    }
    // A queue that drained since the last sample reports its zero once.
    for (const LayerId& layer : previous)
      if (std::find(current.begin(), current.end(), layer) == current.end()) emit(layer, 0, now);
    previous = std::move(current);
    if (prometheus_) prometheus_->set_queue_depth(dev, total);
  }
}

void TelemetryBridge::close_load_window() {
  const Topology& topo = d_.cluster().topology();
  const std::int64_t now = d_.loop().now();
  const auto E = static_cast<std::size_t>(topo.num_experts), D = static_cast<std::size_t>(topo.num_devices);
  for (std::size_t cell = 0; cell < load_window_.size(); ++cell) {
    if (load_window_[cell] == 0) continue;
    tm::ExpertLoad l;
    l.window_start_ns = load_window_start_;
    l.window_end_ns = now;
    l.tokens = load_window_[cell];
    l.device = static_cast<std::int32_t>(cell % D);
    l.expert = static_cast<std::int32_t>((cell / D) % E);
    l.block = static_cast<std::int32_t>(cell / D / E);
    requests_->load(l);
    load_window_[cell] = 0;
  }
  load_window_start_ = now;
  // Meta rides along: a subscriber that joins late learns the run within a window.
  publish_meta();
}

nlohmann::json TelemetryBridge::summary(std::int64_t t_begin, std::int64_t t_end) {
  const Coordinator& co = d_.coordinator();
  const Topology& topo = d_.cluster().topology();
  std::int64_t running = 0;
  for (std::int32_t rank = 0; rank < topo.num_ranks(); ++rank) running += co.running(rank);
  const double span = static_cast<double>(std::max<std::int64_t>(1, t_end - t_begin));
  const double seconds = span * 1e-9;
  nlohmann::json devices = nlohmann::json::array();
  for (std::size_t i = 0; i < window_.size(); ++i) {
    const DeviceWindow& w = window_[i];
    const auto fraction = [&](std::int64_t ns) { return std::min(1.0, static_cast<double>(ns) / span); };
    // Stall fractions by reason's name.
    const auto stall_json = [&](const DeviceWindow& dw) {
      nlohmann::json stall = nlohmann::json::object();
      for (std::size_t r = 0; r < kStallReasons.size(); ++r)
        stall[std::string(stall_reason_name(kStallReasons[r]))] = fraction(dw.stall_ns[r]);
      return stall;
    };
    devices.push_back(
        {{"device", static_cast<std::int64_t>(i)},
         {"name", topo.device_names[i]},
         {"busy", fraction(w.busy_ns)},
         {"stall",
          stall_json(w)},
         {"executions", w.executions},
         {"rows_per_execution", w.executions > 0 ? static_cast<double>(w.rows) / static_cast<double>(w.executions) : 0.0},
         {"transfers", w.transfers},
         {"rows_per_transfer",
          w.transfers > 0 ? static_cast<double>(w.transfer_rows) / static_cast<double>(w.transfers) : 0.0},
         {"queue_takes", w.queue_takes},
         {"queue_wait_ms",
          {{"mean", w.queue_takes > 0 ? static_cast<double>(w.queue_wait_ns) * 1e-6 / static_cast<double>(w.queue_takes)
                                      : 0.0},
           {"max", static_cast<double>(w.queue_wait_max_ns) * 1e-6}}}});
  }
  // Imbalance of each sparse block over the window: tokens of its busiest expert over the mean.
  nlohmann::json imbalance = nlohmann::json::array();
  const auto E = static_cast<std::size_t>(topo.num_experts), D = static_cast<std::size_t>(topo.num_devices);
  for (std::int32_t b = 0; b < topo.num_blocks; ++b) {
    if (!topo.sparse[b]) {
      imbalance.push_back(nullptr);
      continue;
    }
    std::int64_t most = 0, total = 0;
    for (std::size_t e = 0; e < E; ++e) {
      std::int64_t n = 0;
      for (std::size_t dev = 0; dev < D; ++dev) n += summary_load_[(static_cast<std::size_t>(b) * E + e) * D + dev];
      most = std::max(most, n);
      total += n;
    }
    imbalance.push_back(total > 0 ? static_cast<double>(most) * static_cast<double>(E) / static_cast<double>(total) : 0.0);
  }
  const std::int64_t kv_total = co.kv_pages_total();
  return {{"t_begin_ns", t_begin},
          {"t_end_ns", t_end},
          {"tokens_per_s", static_cast<double>(window_tokens_) / seconds},
          {"requests_per_s", static_cast<double>(window_finished_) / seconds},
          {"requests_finished", window_finished_},
          {"requests_rejected", window_rejected_},
          {"tokens_generated", window_tokens_},
          {"running", running},
          {"waiting", co.waiting_requests()},
          {"itl_ms", to_json(latency_stats(itl_ns_))},
          {"ttft_ms", to_json(latency_stats(ttft_ns_))},
          {"kv_usage", kv_total > 0 ? static_cast<double>(co.kv_pages_used()) / static_cast<double>(kv_total) : 0.0},
          {"devices", std::move(devices)},
          {"expert_imbalance", std::move(imbalance)},
          {"dropped_events", hub_.dropped_records()},
          // Prompt tokens admitted in the window, and those whose KV a prefix cache supplied.
          {"prefix_cache",
           {{"queries", co.prefix_cache_queries() - prefix_at_window_start_.first},
            {"hits", co.prefix_cache_hits() - prefix_at_window_start_.second}}}};
}

void TelemetryBridge::close_summary_window() {
  const std::int64_t now = d_.loop().now();
  d_.cluster().flush_stalls();  // stall time up to now counts in this window
  nlohmann::json s = summary(summary_start_, now);
  (void)hub_.publish_json(tm::Topic::Summary, s.dump());
  if (prometheus_) prometheus_->on_summary(s);
  last_summary_load_ = summary_load_;
  {
    const Topology& topo = d_.cluster().topology();
    const auto cells = static_cast<std::size_t>(topo.num_blocks) * static_cast<std::size_t>(topo.num_experts);
    const auto D = static_cast<std::size_t>(topo.num_devices);
    LoadWindow w{std::vector<std::int64_t>(cells, 0), now - summary_start_};
    for (std::size_t cell = 0; cell < summary_load_.size(); ++cell) w.tokens[cell / D] += summary_load_[cell];
    load_history_.push_back(std::move(w));
    if (load_history_.size() > static_cast<std::size_t>(kLoadHistory)) load_history_.pop_front();
  }
  std::fill(summary_load_.begin(), summary_load_.end(), 0);
  std::fill(window_.begin(), window_.end(), DeviceWindow{});
  itl_ns_.clear();
  ttft_ns_.clear();
  window_tokens_ = window_finished_ = window_rejected_ = 0;
  prefix_at_window_start_ = {d_.coordinator().prefix_cache_queries(), d_.coordinator().prefix_cache_hits()};
  last_window_ns_ = now - summary_start_;
  summary_start_ = now;
}

void TelemetryBridge::finish() {
  const std::int64_t now = d_.loop().now();
  if (now > summary_start_) close_summary_window();
  close_load_window();
  sample_queues();
  hub_.flush();
}

nlohmann::json TelemetryBridge::meta() const {
  Deployment& d = d_;
  const Topology& topo = d.cluster().topology();
  const Coordinator& co = d.coordinator();
  nlohmann::json devices = nlohmann::json::array();
  for (std::int32_t dev = 0; dev < topo.num_devices; ++dev) {
    devices.push_back({{"index", dev},
                       {"name", topo.device_names[dev]},
                       {"rank", topo.device_rank[dev]},
                       {"node", info_.devices_per_node > 0 ? dev / info_.devices_per_node : 0},
                       {"process", topo.process_of(dev)},
                       {"experts", topo.device_expert_ids[dev]}});
  }
  const RuntimePolicy& p = co.target_policy();
  nlohmann::json recording = nullptr;
  if (auto path = hub_.recording_path()) recording = {{"path", path->string()}};
  nlohmann::json ring = nullptr;
  if (auto path = hub_.ring_path()) {
    const auto st = hub_.ring_stats();
    ring = {{"path", path->string()},
            {"held_s", st ? static_cast<double>(st->newest_ns - st->oldest_ns) / 1e9 : 0.0},
            {"megabytes", st ? static_cast<double>(st->bytes) / 1e6 : 0.0}};
  }
  const ModelConfig& c = info_.model;
  return {{"schema_version", tm::kSchemaVersion},
          {"run_id", hub_.run_id()},
          {"clock", clock_name(d.options().clock)},
          {"wall_origin_unix_ns", wall_origin_unix_ns_},
          {"pace", d.loop().pace()},
          {"now_ns", d.loop().now()},
          {"backend", info_.backend},
          {"hardware", info_.hardware.empty() ? nlohmann::json(nullptr) : nlohmann::json(info_.hardware)},
          {"model",
           {{"name", info_.model_name},
            {"arch", arch_name(c.arch)},
            {"blocks", c.num_layers},
            {"experts", c.num_experts},
            {"top_k", c.top_k},
            {"hidden_size", c.hidden_size}}},
          {"devices", std::move(devices)},
          {"placement", topo.placement.to_json()},
          {"policy",
           {{"name", policy_name(p.kind)},
            {"scheduler", p.scheduler.name},
            {"lookahead", p.scheduler.lookahead},
            {"decay", p.scheduler.decay},
            {"microbatches", p.microbatches},
            {"expert_chunks", p.expert_chunks},
            {"barrier", p.collective_barrier ? "collective" : "ideal"},
            {"gate", p.gate ? "cost" : "off"},
            {"order", p.order == SharedExpertOrder::Aass ? "aass" : "asas"},
            {"adaptive", p.adaptive},
            {"adaptive_pingpong_from", p.adaptive_pingpong_from},
            {"adaptive_async_from", p.adaptive_async_from}}},
          {"switching", co.switching()},
          {"admission_paused", co.admission_paused()},
          {"batching",
           {{"max_batch_per_rank", co.max_batch_per_rank()},
            {"max_num_batched_tokens", co.options().max_num_batched_tokens}}},
          {"recording", std::move(recording)},
          {"ring", std::move(ring)},
          {"workload", info_.workload},
          {"rebalance", rebalance_},
          {"row_bytes", info_.row_bytes},
          {"processes", info_.processes ? info_.processes() : nlohmann::json(nullptr)}};
}

nlohmann::json TelemetryBridge::load() const {
  const Topology& topo = d_.cluster().topology();
  const auto B = static_cast<std::size_t>(topo.num_blocks), E = static_cast<std::size_t>(topo.num_experts),
             D = static_cast<std::size_t>(topo.num_devices);
  std::vector<std::int64_t> per_device(D, 0);
  nlohmann::json per_expert = nlohmann::json::array();
  for (std::size_t b = 0; b < B; ++b) {
    std::vector<std::int64_t> row(E, 0);
    for (std::size_t e = 0; e < E; ++e) {
      for (std::size_t dev = 0; dev < D; ++dev) {
        const std::int64_t n = last_summary_load_[(b * E + e) * D + dev];
        row[e] += n;
        per_device[dev] += n;
      }
    }
    per_expert.push_back(std::move(row));
  }
  return {{"window_ns", last_window_ns_}, {"per_device", per_device}, {"per_expert", std::move(per_expert)}};
}

TelemetryBridge::RecentLoad TelemetryBridge::recent_expert_load(std::int32_t windows) const {
  const Topology& topo = d_.cluster().topology();
  const auto B = static_cast<std::size_t>(topo.num_blocks), E = static_cast<std::size_t>(topo.num_experts);
  RecentLoad out;
  out.per_expert.resize(B);
  for (std::size_t b = 0; b < B; ++b)
    if (topo.sparse[b]) out.per_expert[b].assign(E, 0.0);
  const std::size_t n = std::min(load_history_.size(), static_cast<std::size_t>(std::max(0, windows)));
  for (std::size_t i = load_history_.size() - n; i < load_history_.size(); ++i) {
    const LoadWindow& w = load_history_[i];
    for (std::size_t b = 0; b < B; ++b)
      if (topo.sparse[b])
        for (std::size_t e = 0; e < E; ++e) out.per_expert[b][e] += static_cast<double>(w.tokens[b * E + e]);
    out.window_ns += w.ns;
    ++out.windows;
  }
  return out;
}

void TelemetryBridge::publish_meta() { (void)hub_.publish_json(tm::Topic::Meta, meta().dump()); }

void TelemetryBridge::publish_control(nlohmann::json event) { (void)hub_.publish_json(tm::Topic::Control, event.dump()); }

void TelemetryBridge::rank_lost(std::int32_t rank, const std::string& why) {
  publish_control({{"t_ns", d_.loop().now()},
                   {"cmd", "rank_lost"},
                   {"request", nullptr},
                   {"old", {{"rank", rank}, {"state", "alive"}}},
                   {"new", {{"rank", rank}, {"state", "dead"}}},
                   {"ok", true},
                   {"rank", rank},
                   {"reason", why}});
  publish_meta();
}

std::map<std::string, std::string> TelemetryBridge::recording_metadata() const {
  const nlohmann::json m = meta();
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : m.items()) out[key] = value.is_string() ? value.get<std::string>() : value.dump();
  return out;
}

}  // namespace sy
