#include "engine/serving/coordinator.h"

#include <algorithm>
#include <cassert>
#include <span>

namespace sy {

Coordinator::Coordinator(EventLoop& loop, const CoordinatorOptions& options, RequestObserver* observer)
    : loop_(loop), options_(options), observer_(observer) {}

const char* reject_reason_name(RejectReason reason) {
  switch (reason) {
    case RejectReason::None: return "none";
    case RejectReason::NeverFits: return "never_fits";
    case RejectReason::QueueFull: return "queue_full";
    case RejectReason::Failed: return "failed";
  }
  return "?";
}

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::None: return "none";
    case FinishReason::Length: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::Cancelled: return "cancelled";
  }
  return "?";
}

void Coordinator::notify(std::int64_t idx, RequestPhase phase, RejectReason reason,
                         const kernels::TokenLogprobs* logprobs) {
  notify(record(idx), phase, reason, logprobs);
}

void Coordinator::notify(const RequestRecord& r, RequestPhase phase, RejectReason reason,
                         const kernels::TokenLogprobs* logprobs) {
  if (!observer_) return;
  RequestUpdate u;
  u.id = r.spec.id;
  u.t_ns = loop_.now();
  u.phase = phase;
  u.rank = r.rank;
  u.tokens_in = static_cast<std::int32_t>(r.spec.prompt.size());
  u.tokens_out = static_cast<std::int32_t>(r.output.size());
  u.tokens_cached = r.cached_positions;
  u.reject_reason = reason;
  if (phase == RequestPhase::Token) u.token = r.output.back();
  u.logprobs = logprobs;
  if (phase == RequestPhase::Finished) u.finish_reason = r.finish_reason;
  observer_->on_request(u);
}

void Coordinator::reject(std::int64_t idx, RejectReason reason, std::string why) {
  RequestRecord& r = record(idx);
  r.state = RequestState::Rejected;
  r.reject_reason = std::move(why);
  --open_;
  open_ids_.erase(r.spec.id);
  notify(idx, RequestPhase::Rejected, reason);
  if (!options_.keep_finished) {
    // A flood of rejections behind one long request must not hold every rejected prompt and
    // message: the observers have had the reason.
    std::vector<std::int32_t>().swap(r.spec.prompt);
    std::string().swap(r.reject_reason);
    std::string().swap(r.spec.external_id);
    drop_done_records();
  }
}

void Coordinator::pop_waiting() {
  window_queue_delay_ns_ += loop_.now() - record(waiting_.front()).spec.arrival_ns;
  ++window_left_queue_;
  waiting_tokens_ -= static_cast<std::int64_t>(record(waiting_.front()).spec.prompt.size());
  waiting_.pop_front();
}

double Coordinator::mean_context() const {
  double sum = 0;
  std::int64_t n = 0;
  for (const RequestRecord& r : requests_) {
    if (r.state != RequestState::Running) continue;
    sum += static_cast<double>(r.spec.prompt.size() + r.output.size());
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

std::int64_t Coordinator::kv_pages_used() const {
  std::int64_t n = 0;
  if (!cluster_) return 0;
  for (std::int32_t rank = 0; rank < cluster_->topology().num_ranks(); ++rank) {
    n += cluster_->kv(rank).used_pages();
  }
  return n;
}

std::int64_t Coordinator::kv_pages_total() const {
  std::int64_t n = 0;
  if (!cluster_) return 0;
  for (std::int32_t rank = 0; rank < cluster_->topology().num_ranks(); ++rank) {
    n += cluster_->kv(rank).num_pages();
  }
  return n;
}

Worker::Hooks Coordinator::hooks() {
  Worker::Hooks h;
  h.on_sampled = [this](std::int64_t request, std::int32_t token, const kernels::TokenLogprobs* logprobs) {
    on_sampled(request, token, logprobs);
  };
  h.on_group_sampled = [this](std::int32_t rank, std::int32_t group) { on_group_sampled(rank, group); };
  h.on_prompt_logprobs = [this](const PromptLogprobs& logprobs) { on_prompt_logprobs(logprobs); };
  return h;
}

void Coordinator::attach(Cluster& cluster, const RuntimePolicy& policy) {
  cluster_ = &cluster;
  policy_ = policy;
  running_per_rank_.assign(static_cast<std::size_t>(cluster.topology().num_ranks()), 0);
  if (options_.prefix_caching)
    for (std::int32_t rank = 0; rank < cluster.topology().num_ranks(); ++rank) cluster.kv(rank).enable_prefix_cache();
  held_.assign(static_cast<std::size_t>(cluster.topology().num_ranks()), {});
  held_count_.assign(static_cast<std::size_t>(cluster.topology().num_ranks()), 0);
  cluster.set_policy(policy);
  reset_slots();
  start_adaptive();
}

void Coordinator::start_adaptive(bool restart) {
  if (!policy_.adaptive || failure_) return;
  if (adaptive_timer_ && !restart) return;
  // Thresholds set by the operator pin the bands; without them the tuner measures.
  const bool bands = policy_.adaptive_pingpong_from < 1e9 || policy_.adaptive_async_from < 1e9;
  if (bands) {
    tuner_.reset();
    AdaptiveThresholds t;
    t.pingpong_from = policy_.adaptive_pingpong_from;
    t.async_from = policy_.adaptive_async_from;
    if (!chooser_ || chooser_->thresholds().pingpong_from != t.pingpong_from ||
        chooser_->thresholds().async_from != t.async_from)
      chooser_.emplace(t, policy_.kind);
    chooser_->set_current(policy_.kind);
  } else {
    chooser_.reset();
    if (!tuner_) {
      tuner_.emplace(AdaptiveTuning{}, policy_.kind);
    }
    // Its own probe's switch leaves it as it was; anyone else's (an operator) ends a probe.
    if (tuner_->current() != policy_.kind) tuner_->set_current(policy_.kind);
  }
  adaptive_timer_ = true;
  reset_adaptive_window();
  loop_.post(loop_.now() + adaptive_window_ns(), [this, seq = adaptive_window_seq_] {
    if (seq == adaptive_window_seq_) adaptive_window();
  });
}

std::int64_t Coordinator::adaptive_window_ns() const {
  return tuner_ && tuner_->probing() ? tuner_->tuning().probe_window_ns : kAdaptiveWindowNs;
}

void Coordinator::reset_adaptive_window() {
  ++adaptive_window_seq_;
  window_start_ns_ = loop_.now();
  window_offered_tokens_ = 0;
  window_arrivals_ = 0;
  window_queue_delay_ns_ = 0;
  window_left_queue_ = 0;
  window_tokens_ = 0;
  window_gap_sum_ns_ = 0;
  window_gaps_ = 0;
}

RuntimePolicy Coordinator::announce_adaptive_switch(std::int64_t now, PolicyKind to, const std::string& reason) {
  RuntimePolicy next = policy_;
  next.kind = to;
  const AdaptiveSwitch sw{now, policy_, next, reason};
  adaptive_switches_.push_back(sw);
  if (on_adaptive_switch_) on_adaptive_switch_(sw);
  return next;
}

void Coordinator::adaptive_window() {
  // The timer runs while the policy in force (or the one asked for) is adaptive and there is
  // work: an idle coordinator (between a service's requests, at the end of a run, on a rank that
  // only runs workers) posts nothing, so its event loop can end; submit() wakes it.
  if (failure_ || !target_policy().adaptive || done()) {
    adaptive_timer_ = false;
    return;
  }
  const std::int64_t now = loop_.now();
  // A probe's short window that has not yet seen enough inter-token gaps runs on, up to a
  // whole window (a small batch gives few tokens in 50 ms).
  if (tuner_ && tuner_->probing() && !switching() && window_gaps_ < tuner_->tuning().min_itl_samples &&
      now - window_start_ns_ < kAdaptiveWindowNs) {
    ++adaptive_window_seq_;
    loop_.post(window_start_ns_ + kAdaptiveWindowNs, [this, seq = adaptive_window_seq_] {
      if (seq == adaptive_window_seq_) adaptive_window();
    });
    return;
  }
  const double window_s = static_cast<double>(now - window_start_ns_) * 1e-9;
  const double per_rank = window_s > 0 ? 1.0 / window_s / std::max(1, cluster_->topology().num_ranks()) : 0;
  // The queue's delay: the mean wait of the requests that left it in the window, or the wait
  // so far of the oldest still in it, whichever is longer (a policy far behind admits nobody).
  double queue_delay_ns = window_left_queue_ > 0 ? static_cast<double>(window_queue_delay_ns_) / static_cast<double>(window_left_queue_) : 0;
  if (!waiting_.empty())
    queue_delay_ns = std::max(queue_delay_ns, static_cast<double>(now - record(waiting_.front()).spec.arrival_ns));
  // A switch still on its way to its safe point is not second-guessed.
  if (!switching() && tuner_) {
    TunerObservation o;
    o.t_ns = now;
    o.window_s = window_s;
    o.policy = policy_.kind;
    o.offered_tokens_per_s_per_rank = window_offered_tokens_ * per_rank;
    o.arrivals = window_arrivals_;
    double running = 0;
    for (std::int32_t n : running_per_rank_) running += n;
    o.running_per_rank = running / static_cast<double>(std::max<std::size_t>(1, running_per_rank_.size()));
    o.waiting_per_rank = static_cast<double>(waiting_.size()) / static_cast<double>(std::max<std::size_t>(1, running_per_rank_.size()));
    o.queue_delay_ms = queue_delay_ns * 1e-6;
    o.served_tokens_per_s = window_s > 0 ? static_cast<double>(window_tokens_) / window_s : 0;
    o.itl_ms = window_gaps_ > 0 ? static_cast<double>(window_gap_sum_ns_) / static_cast<double>(window_gaps_) * 1e-6 : 0;
    o.itl_samples = window_gaps_;
    o.drain_ms = static_cast<double>(last_drain_ns_) * 1e-6;
    last_drain_ns_ = 0;
    if (auto d = tuner_->observe(o)) {
      const RuntimePolicy next = announce_adaptive_switch(now, d->to, d->reason);
      if (d->to != d->from && request_policy(next).ok()) adaptive_asked_ns_ = now;
    }
  } else if (!switching() && chooser_) {
    AdaptiveObservation o;
    o.t_ns = now;
    o.offered_tokens_per_s_per_rank = window_offered_tokens_ * per_rank;
    if (auto d = chooser_->observe(o)) (void)request_policy(announce_adaptive_switch(now, d->to, d->reason));
  }
  reset_adaptive_window();
  loop_.post(now + adaptive_window_ns(), [this, seq = adaptive_window_seq_] {
    if (seq == adaptive_window_seq_) adaptive_window();
  });
}

bool Coordinator::hold_for_wave(std::int32_t rank) const {
  // Only while another request of the rank is in flight: its sampling is then sure to come.
  const auto r = static_cast<std::size_t>(rank);
  return !policy_.grouped() && running_per_rank_[r] - 1 - held_count_[r] > 0;
}

void Coordinator::release_wave(std::int32_t rank) {
  const auto r = static_cast<std::size_t>(rank);
  if (held_[r].empty()) return;
  std::vector<std::int64_t> held;
  held.swap(held_[r]);
  held_count_[r] = 0;
  for (std::int64_t idx : held)
    if (record(idx).state == RequestState::Running) inject_soon(idx);
}

void Coordinator::reset_slots() {
  slots_.assign(static_cast<std::size_t>(policy_.groups()), Slot{});
  ++slots_epoch_;
}

void Coordinator::submit(RequestSpec spec) {
  ++submitted_;
  start_adaptive();  // the timer sleeps while nothing is submitted or open
  const std::int64_t at = spec.arrival_ns;
  if (!options_.keep_finished) {
    // A service keeps records only of requests it accepts: one turned away at a full queue
    // leaves nothing behind, so memory stays flat whatever the arrival rate.
    loop_.post(at, [this, spec = std::move(spec)]() mutable { on_unrecorded_arrival(std::move(spec)); });
    return;
  }
  const auto idx = first_request_ + static_cast<std::int64_t>(requests_.size());
  requests_.push_back(RequestRecord{std::move(spec), RequestState::Pending, -1, {}, {}, -1});
  loop_.post(at, [this, idx] { on_arrival(idx); });
}

bool Coordinator::queue_full(std::int64_t prompt_tokens) const {
  return static_cast<std::int64_t>(waiting_.size()) >= options_.max_waiting_requests ||
         waiting_tokens_ + prompt_tokens > options_.max_waiting_tokens;
}

std::string Coordinator::queue_full_message(const std::string& external_id) const {
  return "request " + external_id + " rejected: the admission queue is full (" + std::to_string(waiting_.size()) +
         " requests and " + std::to_string(waiting_tokens_) + " prompt tokens waiting; limits " +
         std::to_string(options_.max_waiting_requests) + " requests, " + std::to_string(options_.max_waiting_tokens) +
         " tokens)";
}

void Coordinator::on_unrecorded_arrival(RequestSpec spec) {
  if (spec.max_new_tokens > 0 && queue_full(static_cast<std::int64_t>(spec.prompt.size()))) {
    ++arrived_;
    ++rejected_queue_full_;
    RequestRecord r{std::move(spec), RequestState::Rejected, -1, {}, {}, -1};
    notify(r, RequestPhase::Arrival);
    notify(r, RequestPhase::Rejected, RejectReason::QueueFull);
    return;
  }
  const auto idx = first_request_ + static_cast<std::int64_t>(requests_.size());
  requests_.push_back(RequestRecord{std::move(spec), RequestState::Pending, -1, {}, {}, -1});
  on_arrival(idx);
}

void Coordinator::on_arrival(std::int64_t idx) {
  RequestRecord& r = record(idx);
  r.state = RequestState::Waiting;
  ++arrived_;
  ++open_;
  open_ids_[r.spec.id] = idx;
  notify(idx, RequestPhase::Arrival);
  if (failure_) {
    reject(idx, RejectReason::Failed, *failure_);
    return;
  }
  if (r.spec.max_new_tokens <= 0) {
    finish(idx, FinishReason::Length);
    return;
  }
  const auto prompt = static_cast<std::int64_t>(r.spec.prompt.size());
  if (queue_full(prompt)) {
    ++rejected_queue_full_;
    reject(idx, RejectReason::QueueFull, queue_full_message(r.spec.external_id));
    return;
  }
  waiting_.push_back(idx);
  waiting_tokens_ += prompt;
  window_offered_tokens_ += r.spec.max_new_tokens;
  ++window_arrivals_;
  if (policy_.grouped()) {
    start_idle_slots();
  } else {
    admit_async();
  }
}

bool Coordinator::admit_one(std::int32_t slot) {
  if (paused_ || waiting_.empty()) return false;
  const std::int64_t idx = waiting_.front();
  RequestRecord& r = record(idx);
  const auto positions = static_cast<std::int32_t>(r.spec.prompt.size()) + r.spec.max_new_tokens;
  const std::int32_t ranks = cluster_->topology().num_ranks();
  // Most free KV pages wins; on a tie the rank with fewer running requests, and then the next
  // rank after the last one chosen, so that an idle cluster spreads requests round-robin.
  // With prefix caching the rank holding the longest cached prefix of the prompt comes first;
  // a request asking for its prompt's log-probabilities takes nothing from the cache
  // (KvBlockManager::admit), so it looks nothing up.
  const std::span<const std::int32_t> prompt(r.spec.prompt);
  const bool scores_prompt = r.spec.sampling && r.spec.sampling->prompt_logprobs >= 0;
  const std::span<const std::int32_t> lookup = scores_prompt ? std::span<const std::int32_t>() : prompt;
  std::int32_t best = -1, best_free = -1, best_hits = 0;
  for (std::int32_t i = 0; i < ranks; ++i) {
    const std::int32_t rank = (last_rank_ + 1 + i) % ranks;
    const KvBlockManager& kv = cluster_->kv(rank);
    if (running_per_rank_[rank] >= options_.max_batch_per_rank) continue;
    const std::optional<std::int32_t> admissible = kv.admissible(positions, lookup);
    if (!admissible) continue;
    const std::int32_t hits = *admissible;
    const bool better = hits > best_hits || (hits == best_hits && (kv.free_pages() > best_free ||
                        (kv.free_pages() == best_free && running_per_rank_[rank] < running_per_rank_[best])));
    if (best < 0 || better) {
      best = rank;
      best_free = kv.free_pages();
      best_hits = hits;
    }
  }
  if (best < 0) {
    // Reject what can never fit (more positions than a whole empty rank holds); queue the rest.
    bool could_ever_fit = false;
    for (std::int32_t rank = 0; rank < ranks; ++rank) {
      const KvBlockManager& kv = cluster_->kv(rank);
      if (kv.pages_for(positions) <= kv.num_pages()) could_ever_fit = true;
    }
    if (!could_ever_fit) {
      pop_waiting();
      reject(idx, RejectReason::NeverFits,
             "request " + r.spec.external_id + " needs " + std::to_string(positions) +
                 " KV positions, more than any attention rank holds");
      return true;  // the queue moved: let the caller try the next one
    }
    return false;
  }
  const SamplingSpec sampling =
      r.spec.sampling ? *r.spec.sampling
                      : SamplingSpec{options_.sampling.temperature,
                                     options_.sampling.top_p,
                                     options_.sampling.top_k,
                                     options_.seed ^ static_cast<std::uint64_t>(r.spec.id),
                                     -1,
                                     options_.sampling.min_p,
                                     options_.penalties.presence,
                                     options_.penalties.frequency,
                                     options_.penalties.repetition};
  const bool ok = cluster_->admit(best, idx, positions, sampling, prompt, r.spec.logit_bias, r.spec.guide);
  assert(ok && "rank had the pages a moment ago");
  (void)ok;
  r.cached_positions = cluster_->kv(best).cached_positions(idx);
  r.prefilled = r.cached_positions;
  r.admitted_seq = admissions_++;
  if (options_.prefix_caching) {
    prefix_queries_ += static_cast<std::int64_t>(prompt.size());
    prefix_hits_ += r.cached_positions;
  }
  pop_waiting();
  r.state = RequestState::Running;
  r.rank = best;
  last_rank_ = best;
  r.slot = slot;
  ++running_per_rank_[best];
  notify(idx, RequestPhase::Admitted);
  if (slot >= 0) {
    slots_[slot].members.push_back(idx);
  } else if (hold_for_wave(best)) {
    held_[static_cast<std::size_t>(best)].push_back(idx);
    ++held_count_[static_cast<std::size_t>(best)];
  } else {
    inject_soon(idx);
  }
  return true;
}

void Coordinator::admit_async() {
  if (switching()) return;
  while (admit_one(-1)) {
  }
}

std::int32_t Coordinator::append_next_rows(TokenBatch& out, std::int64_t idx, std::int32_t prompt_rows) {
  RequestRecord& r = record(idx);
  const auto prompt = static_cast<std::int32_t>(r.spec.prompt.size());
  out.columns = kAttentionColumns | kColumnToken;  // block 0's rows: the token to embed
  auto row = [&](std::int32_t token, std::int32_t position) {
    out.row.push_back({.request = idx, .position = position, .rank = r.rank, .token = token});
  };
  if (r.output.empty() && options_.skip_prefill && prompt > 0) {
    row(r.spec.prompt.back(), prompt - 1);
    return 1;
  }
  if (r.output.empty()) {
    // Positions a prefix cache supplied, or an earlier chunk fed, are not computed again.
    const std::int32_t end = prompt_rows < 0 ? prompt : std::min(prompt, r.prefilled + prompt_rows);
    const std::int32_t from = r.prefilled;
    for (std::int32_t i = from; i < end; ++i) row(r.spec.prompt[static_cast<std::size_t>(i)], i);
    r.prefilled = std::max(r.prefilled, end);
    return std::max(0, end - from);
  }
  row(r.output.back(), prompt + static_cast<std::int32_t>(r.output.size()) - 1);
  return 1;
}

bool Coordinator::prefilling(const RequestRecord& r) const {
  return r.output.empty() && !options_.skip_prefill && r.prefilled < static_cast<std::int32_t>(r.spec.prompt.size());
}

void Coordinator::fill_pass(TokenBatch& out, const std::vector<std::int64_t>& requests,
                            std::vector<std::int64_t>& left_out) {
  const std::int64_t budget = options_.max_num_batched_tokens;
  if (budget <= 0) {
    for (std::int64_t idx : requests) append_next_rows(out, idx);
    return;
  }
  // vLLM v1's order: the running decodes first (one row each), then the prompts.
  std::int64_t used = 0;
  std::vector<std::int64_t> prompts;
  for (std::int64_t idx : requests) {
    if (prefilling(record(idx))) {
      prompts.push_back(idx);
    } else {
      used += append_next_rows(out, idx);
    }
  }
  std::stable_sort(prompts.begin(), prompts.end(),
                   [&](std::int64_t a, std::int64_t b) { return record(a).admitted_seq < record(b).admitted_seq; });
  bool chunked = false;
  for (std::int64_t idx : prompts) {
    const std::int64_t left = budget - used;
    if (left <= 0 && chunked) {
      left_out.push_back(idx);
      continue;
    }
    // Decodes that fill the budget still leave the oldest prompt one row: it never starves.
    used += append_next_rows(out, idx, static_cast<std::int32_t>(std::max<std::int64_t>(left, 1)));
    chunked = true;
  }
}

void Coordinator::inject_soon(std::int64_t idx) {
  // Every request sampled or admitted at one instant enters block 0 in one batch per rank.
  const std::int32_t rank = record(idx).rank;
  if (pending_injection_.empty()) pending_injection_.resize(static_cast<std::size_t>(cluster_->topology().num_ranks()));
  pending_injection_[static_cast<std::size_t>(rank)].push_back(idx);
  if (injection_posted_) return;
  injection_posted_ = true;
  loop_.post_now([this] {
    injection_posted_ = false;
    for (std::int32_t r = 0; r < static_cast<std::int32_t>(pending_injection_.size()); ++r) {
      std::vector<std::int64_t> requests;
      requests.swap(pending_injection_[static_cast<std::size_t>(r)]);
      // A request that failed meanwhile (fail() may have dropped its record) feeds nothing.
      std::erase_if(requests, [&](std::int64_t i) {
        return i < first_request_ || record(i).state != RequestState::Running;
      });
      if (requests.empty()) continue;
      TokenBatch rows;
      std::vector<std::int64_t> left_out;
      fill_pass(rows, requests, left_out);
      // What the budget left out enters with the rank's next pass, which this one's sampling
      // starts (release_wave): it holds a row of a prompt at least.
      for (std::int64_t later : left_out) {
        held_[static_cast<std::size_t>(r)].push_back(later);
        ++held_count_[static_cast<std::size_t>(r)];
      }
      if (rows.empty()) continue;
      if (observer_) observer_->on_pass(r, rows.row);
      cluster_->inject(r, -1, std::move(rows));
    }
  });
}

void Coordinator::start_idle_slots() {
  for (std::int32_t s = 0; s < static_cast<std::int32_t>(slots_.size()); ++s)
    if (!slots_[s].running) start_slot(s);
}

void Coordinator::start_slot(std::int32_t s) {
  if (switching()) return;
  Slot& slot = slots_[s];
  assert(!slot.running);
  // Join waiting requests to this micro-batch up to its fair share of everything running and
  // waiting, and never below the largest other one, so the micro-batches stay balanced
  // (MegaScale-Infer wants equal micro-batches) while a burst still fills them in one pass.
  std::size_t total = waiting_.size(), largest_other = 0;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    total += slots_[i].members.size();
    if (static_cast<std::int32_t>(i) != s) largest_other = std::max(largest_other, slots_[i].members.size());
  }
  const std::size_t fair = (total + slots_.size() - 1) / slots_.size();
  const std::size_t limit = std::max(fair, largest_other);
  while (!waiting_.empty() && slot.members.size() < limit) {
    if (!admit_one(s)) break;
  }
  if (slot.members.empty()) return;
  slot.running = true;
  slot.group = next_group_++;
  slot.ranks_done = 0;
  group_slot_[slot.group] = s;
  const std::int32_t ranks = cluster_->topology().num_ranks();
  std::vector<std::vector<std::int64_t>> members(static_cast<std::size_t>(ranks));
  for (std::int64_t idx : slot.members) members[static_cast<std::size_t>(record(idx).rank)].push_back(idx);
  std::vector<TokenBatch> per_rank(static_cast<std::size_t>(ranks));
  // A prompt the budget leaves out stays a member: the micro-batch's next iteration feeds it.
  std::vector<std::int64_t> left_out;
  for (std::int32_t rank = 0; rank < ranks; ++rank)
    fill_pass(per_rank[static_cast<std::size_t>(rank)], members[static_cast<std::size_t>(rank)], left_out);
  // Every rank takes part in every micro-batch, even with no tokens: the barrier counts it.
  for (std::int32_t rank = 0; rank < ranks; ++rank) {
    if (observer_ && !per_rank[rank].empty()) observer_->on_pass(rank, per_rank[rank].row);
    cluster_->inject(rank, slot.group, std::move(per_rank[rank]));
  }
}

void Coordinator::on_sampled(std::int64_t idx, std::int32_t token, const kernels::TokenLogprobs* logprobs) {
  if (failure_) return;  // its request has failed already
  RequestRecord& r = record(idx);
  FinishReason reason = FinishReason::None;
  if (r.cancel) {
    reason = FinishReason::Cancelled;  // nobody wants the token any more
  } else if (token == Worker::kNoToken) {
    // A chunk of the prompt that is not its last is written: the next chunk follows like a
    // next token would (its KV is complete only after the last chunk, so nothing is cached yet).
  } else {
    // The prompt's KV is written in every layer once its first token is out: later prompts may share it.
    if (r.output.empty() && options_.prefix_caching) cluster_->kv(r.rank).cache_written(idx, r.spec.prompt);
    r.output.push_back(token);
    const std::int64_t now = loop_.now();
    ++window_tokens_;
    if (r.last_token_ns >= policy_since_ns_) {  // both tokens under the policy in force
      window_gap_sum_ns_ += now - r.last_token_ns;
      ++window_gaps_;
    }
    r.last_token_ns = now;
    notify(idx, RequestPhase::Token, RejectReason::None, logprobs);
    if (stops_at(r, token)) {
      reason = FinishReason::Stop;
    } else if (static_cast<std::int32_t>(r.output.size()) >= r.spec.max_new_tokens) {
      reason = FinishReason::Length;
    }
  }
  const std::int32_t rank = r.rank;
  if (reason != FinishReason::None) {
    // What a finished request wrote serves the next turn of its conversation (whose prompt is
    // this prompt and this answer): the prompt and every output fed back (all but the last).
    if (options_.prefix_caching) {
      std::vector<std::int32_t> written = r.spec.prompt;
      if (!r.output.empty()) {
        written.insert(written.end(), r.output.begin(), r.output.end() - 1);
      } else if (!options_.skip_prefill) {
        // Cancelled between two chunks of its prompt: only what was fed is written (nothing is in
        // flight here), and pages past it hold no KV that a later prompt may take.
        written.resize(std::min(written.size(), static_cast<std::size_t>(r.prefilled)));
      }
      cluster_->kv(rank).cache_written(idx, written);
    }
    finish(idx, reason);
    if (!policy_.grouped()) admit_async();
  } else if (!policy_.grouped()) {
    if (switching()) {
      parked_.push_back(idx);
    } else {
      inject_soon(idx);
    }
  }
  // The rank's wave is passing the sampler: what was admitted meanwhile joins it.
  if (!policy_.grouped() && !switching() && rank >= 0) release_wave(rank);
  if (switching()) loop_.post_now([this] { check_safe_point(); });
}

void Coordinator::on_prompt_logprobs(const PromptLogprobs& logprobs) {
  if (failure_ || !observer_) return;
  // From another process (engine/dist) the index is a peer's word: one that names no running
  // request is dropped rather than read out of range.
  const std::int64_t at = logprobs.request - first_request_;
  if (at < 0 || at >= static_cast<std::int64_t>(requests_.size())) return;
  const RequestRecord& r = record(logprobs.request);
  if (r.state != RequestState::Running || r.cancel) return;  // nobody wants them any more
  observer_->on_prompt_logprobs(r.spec.id, logprobs);
}

bool Coordinator::stops_at(const RequestRecord& r, std::int32_t token) const {
  if (!r.spec.ignore_eos && options_.eos_token_id && token == *options_.eos_token_id) return true;
  return std::find(r.spec.stop_token_ids.begin(), r.spec.stop_token_ids.end(), token) != r.spec.stop_token_ids.end();
}

bool Coordinator::cancel(std::int64_t request_id) {
  const auto found = open_ids_.find(request_id);
  if (found == open_ids_.end()) return false;
  const std::int64_t idx = found->second;
  RequestRecord& r = record(idx);
  if (r.state == RequestState::Waiting) {
    const auto at = std::find(waiting_.begin(), waiting_.end(), idx);
    assert(at != waiting_.end());
    waiting_tokens_ -= static_cast<std::int64_t>(r.spec.prompt.size());
    waiting_.erase(at);
    finish(idx, FinishReason::Cancelled);
    return true;
  }
  // Running: its rows are in flight (or parked for a switch, or between two iterations of its
  // micro-batch); the pages go when they come back, in on_sampled.
  r.cancel = true;
  return true;
}

void Coordinator::finish(std::int64_t idx, FinishReason reason) {
  RequestRecord& r = record(idx);
  r.finish_reason = reason;
  open_ids_.erase(r.spec.id);
  if (r.rank >= 0) {
    cluster_->release(r.rank, idx);
    --running_per_rank_[r.rank];
  }
  if (r.slot >= 0) {
    auto& members = slots_[r.slot].members;
    members.erase(std::remove(members.begin(), members.end(), idx), members.end());
  }
  r.state = RequestState::Finished;
  --open_;
  notify(idx, RequestPhase::Finished);
  drop_done_records();
}

void Coordinator::drop_done_records() {
  if (options_.keep_finished) return;
  // Long-running services drop finished records once every earlier one has finished too.
  while (!requests_.empty() && (requests_.front().state == RequestState::Finished ||
                                requests_.front().state == RequestState::Rejected)) {
    requests_.pop_front();
    ++first_request_;
  }
}

void Coordinator::on_group_sampled(std::int32_t /*rank*/, std::int32_t group) {
  if (failure_) return;
  const auto found = group_slot_.find(group);
  assert(found != group_slot_.end());
  const std::int32_t s = found->second;
  Slot& slot = slots_[s];
  if (++slot.ranks_done < cluster_->topology().num_ranks()) return;
  slot.running = false;
  group_slot_.erase(found);
  // Start the next iteration after the worker's callback has returned.
  loop_.post_now([this, s, epoch = slots_epoch_] {
    if (epoch != slots_epoch_) return;  // a policy switch rebuilt the slots meanwhile
    if (switching()) {
      check_safe_point();
    } else if (!slots_[s].running) {
      start_slot(s);
    }
  });
}

Status Coordinator::request_policy(const RuntimePolicy& policy, ChangeDone done) {
  SY_RETURN_IF_ERROR(validate(policy));
  pending_policy_ = policy;
  ++change_seq_;
  if (done) pending_done_.push_back(std::move(done));
  loop_.post_now([this] { check_safe_point(); });
  return Status::Ok();
}

Status Coordinator::request_placement(Placement placement, ChangeDone done, std::vector<WeightCopy>* copies) {
  const Topology& topo = cluster_->topology();
  SY_RETURN_IF_ERROR(placement.check_shape(topo.num_experts, topo.sparse));
  SY_RETURN_IF_ERROR(placement.validate(topo.num_devices));
  auto started = cluster_->stage_weights(placement, [this] { weights_ready(); });
  if (!started.ok()) return started.status();
  if (copies) *copies = *started;
  if (cluster_->copying()) {
    // Serving goes on under the current placement while the weights travel.
    staged_placement_ = std::move(placement);
    if (done) staged_done_.push_back(std::move(done));
    return Status::Ok();
  }
  pending_placement_ = std::move(placement);
  ++change_seq_;
  if (done) pending_done_.push_back(std::move(done));
  loop_.post_now([this] { check_safe_point(); });
  return Status::Ok();
}

void Coordinator::weights_ready() {
  if (!staged_placement_) return;
  // A pending placement not yet applied is superseded: its callers hear at this one's switch.
  pending_placement_ = std::move(*staged_placement_);
  staged_placement_.reset();
  for (auto& fn : staged_done_) pending_done_.push_back(std::move(fn));
  staged_done_.clear();
  ++change_seq_;
  cluster_->set_weights_wait(true);
  loop_.post_now([this] { check_safe_point(); });
}

void Coordinator::fail(const std::string& why) {
  if (failure_) return;
  failure_ = why;
  paused_ = true;
  waiting_.clear();
  waiting_tokens_ = 0;
  std::vector<std::int64_t> open;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(requests_.size()); ++i) {
    const RequestState state = requests_[static_cast<std::size_t>(i)].state;
    if (state == RequestState::Waiting || state == RequestState::Running) open.push_back(first_request_ + i);
  }
  for (std::int64_t idx : open) reject(idx, RejectReason::Failed, why);
}

void Coordinator::set_admission_paused(bool paused) {
  if (failure_) return;
  paused_ = paused;
  if (!paused) loop_.post_now([this] { policy_.grouped() ? start_idle_slots() : admit_async(); });
}

void Coordinator::check_safe_point() {
  if (!switching() || releasing_ || injection_posted_ || !cluster_->quiescent()) return;
  for (const Slot& s : slots_)
    if (s.running) return;
  // The change stays pending (nothing is admitted or injected) until every process of the
  // deployment has applied it: release_safe_point.
  releasing_ = true;
  const RuntimePolicy policy = pending_policy_ ? *pending_policy_ : policy_;
  std::vector<ChangeDone> done;
  done.swap(pending_done_);
  cluster_->apply_at_safe_point(policy, pending_placement_, [this, policy, seq = change_seq_, done = std::move(done)] {
    release_safe_point(policy, seq, done);
  });
}

void Coordinator::release_safe_point(const RuntimePolicy& policy, std::uint64_t seq, const std::vector<ChangeDone>& done) {
  releasing_ = false;
  const bool newer = seq != change_seq_;  // another change was asked for while this one was applied
  cluster_->set_weights_wait(newer && pending_placement_.has_value());
  if (pending_policy_) ++switches_;
  if (pending_placement_) ++placement_changes_;
  const bool kind_changed = policy.kind != policy_.kind;
  policy_ = policy;
  if (kind_changed) policy_since_ns_ = loop_.now();
  if (adaptive_asked_ns_ >= 0) last_drain_ns_ = loop_.now() - adaptive_asked_ns_;
  adaptive_asked_ns_ = -1;
  if (!newer) {
    pending_placement_.reset();
    pending_policy_.reset();
  }
  for (auto& fn : done) fn(loop_.now());
  if (newer) {
    loop_.post_now([this] { check_safe_point(); });
    return;
  }
  // Every running request sits between two tokens: re-enter them under the new policy.
  std::vector<std::int64_t> running;
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(requests_.size()); ++i)
    if (requests_[static_cast<std::size_t>(i)].state == RequestState::Running) running.push_back(first_request_ + i);
  parked_.clear();
  for (auto& h : held_) h.clear();  // running: re-entered below with every other running request
  std::fill(held_count_.begin(), held_count_.end(), 0);
  reset_slots();
  if (policy_.grouped()) {
    for (std::size_t i = 0; i < running.size(); ++i) {
      const auto s = static_cast<std::int32_t>(i % slots_.size());
      record(running[i]).slot = s;
      slots_[s].members.push_back(running[i]);
    }
    start_idle_slots();
  } else {
    for (std::int64_t idx : running) {
      record(idx).slot = -1;
      inject_soon(idx);
    }
    admit_async();
  }
  // A new policy's first window starts now, not mid-way through the drain.
  start_adaptive(kind_changed && adaptive_timer_);
}

}  // namespace sy
