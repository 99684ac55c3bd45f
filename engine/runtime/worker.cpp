#include "engine/runtime/worker.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace sy {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::string LayerId::to_string() const {
  switch (kind) {
    case LayerKind::Attention: return "attn[b" + std::to_string(block) + ",r" + std::to_string(index) + "]";
    case LayerKind::Expert: return "expert[b" + std::to_string(block) + ",e" + std::to_string(index) + "]";
    case LayerKind::Sampler: return "sampler[r" + std::to_string(index) + "]";
  }
  return "?";
}

Worker::Worker(std::int32_t device, const Topology& topology, EventLoop& loop, Executor& executor,
               Transport& transport, BatchRecycler& recycler, RuntimeObserver* observer, Hooks hooks,
               KvBlockManager* kv)
    : device_(device),
      topo_(topology),
      loop_(loop),
      executor_(executor),
      transport_(transport),
      recycler_(recycler),
      observer_(observer),
      hooks_(std::move(hooks)),
      kv_(kv) {
  outgoing_.resize(static_cast<std::size_t>(topo_.num_devices));
  outgoing_used_.assign(static_cast<std::size_t>(topo_.num_devices), 0);
  gather_rows_.resize(static_cast<std::size_t>(topo_.num_devices));
  lane_ = loop_.lane(device_);
  reload_placement();
  set_policy(RuntimePolicy{});
  stalled_ = true;
  stall_start_ = loop_.now();
}

void Worker::reload_placement() {
  assert(quiescent());
  rank_ = topo_.device_rank[device_];
  expert_column_.assign(static_cast<std::size_t>(topo_.num_experts), -1);
  column_expert_.clear();
  if (rank_ >= 0) column_expert_.push_back(-1);
  for (std::int32_t e : topo_.device_expert_ids[device_]) {
    expert_column_[e] = static_cast<std::int32_t>(column_expert_.size());
    column_expert_.push_back(e);
  }
  columns_ = std::max<std::int32_t>(1, static_cast<std::int32_t>(column_expert_.size()));
  // Cleared, then sized: queued batches hold activations, which move but never copy.
  queues_.clear();
  queues_.resize(static_cast<std::size_t>((topo_.num_blocks + 1) * columns_));
  for (std::size_t qi = 0; qi < queues_.size(); ++qi) queues_[qi].block = qi / static_cast<std::size_t>(columns_);
  grid_.reset(topo_.num_blocks + 1, columns_);
  pooled_rows_.assign(static_cast<std::size_t>(topo_.num_blocks + 1), 0);
  inbound_expert_rows_.assign(static_cast<std::size_t>(topo_.num_blocks + 1), 0);
  // The columns are every expert the device holds in any block; where the placement differs
  // between blocks, each block has only its own (the sampler's block keeps the whole width).
  for (std::int32_t b = 0; b < topo_.num_blocks; ++b) {
    std::int32_t width = rank_ >= 0 ? 1 : 0;
    if (topo_.placement.is_sparse(b))
      for (std::int32_t e : column_expert_)
        if (e >= 0 && topo_.placement.holds(b, e, device_)) ++width;
    if (width != columns_) grid_.set_block_width(b, width);
  }
}

void Worker::set_policy(const RuntimePolicy& policy) {
  assert(quiescent());
  auto scheduler = make_scheduler(policy.scheduler);
  assert(scheduler.ok());  // validated by the caller
  policy_ = policy;
  scheduler_ = std::move(scheduler).value();
  arrived_.clear();
  executor_.on_policy(policy);
  gated_ = false;
  for (LayerKind kind : {LayerKind::Attention, LayerKind::Expert, LayerKind::Sampler}) {
    auto& g = gates_[static_cast<std::size_t>(kind)];
    g.reset();
    if (policy.kind != PolicyKind::Async || !policy.gate) continue;
    g = executor_.gate(kind);
    if (g && g->trivial()) g.reset();
    gated_ = gated_ || g.has_value();
  }
}

std::int64_t Worker::expected_rows(std::int32_t block, std::int32_t column) const {
  const auto b = static_cast<std::size_t>(block);
  return column_expert_[static_cast<std::size_t>(column)] < 0 ? pooled_rows_[b] : inbound_expert_rows_[b];
}

const QueueGrid& Worker::open_queues() {
  if (!gated_) return grid_;
  const std::int64_t now = loop_.now();
  // Tier 1: full (the minimum batch) or starving; tier 2: open (past the maximum wait, or with
  // nothing more on its way); tier 3: small, young and expecting rows. The scheduler picks from
  // tier 1 when there is one, else from tier 2; the rest is held.
  tiers_.clear();
  std::int64_t first_open = std::numeric_limits<std::int64_t>::max();
  int best = 3;
  grid_.for_each_occupied_block([&](std::int32_t b) {
    for (std::int32_t c = 0; c < columns_; ++c) {
      const std::int64_t rows = grid_.at(b, c);
      if (rows == 0) continue;
      const std::int32_t e = column_expert_[static_cast<std::size_t>(c)];
      const LayerKind kind = e >= 0 ? LayerKind::Expert : b == topo_.num_blocks ? LayerKind::Sampler : LayerKind::Attention;
      const auto& gate = gates_[static_cast<std::size_t>(kind)];
      int tier = 1;
      if (gate && rows < gate->min_rows) {
        std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
        for (const TokenBatch& batch : queues_[static_cast<std::size_t>(b * columns_ + c)].batches)
          if (!batch.empty()) oldest = std::min(oldest, batch.oldest_ns);
        if (now - oldest >= kGateStarveWaits * gate->max_wait_ns) {
          tier = 1;  // a small queue waits behind full ones for a bounded time only
        } else if (gate->open(rows, oldest, now) || expected_rows(b, c) <= 0) {
          tier = 2;
        } else {
          tier = 3;
          first_open = std::min(first_open, gate->opens_at(oldest));
        }
      }
      best = std::min(best, tier);
      tiers_.push_back({b * columns_ + c, tier});
    }
  });
  gated_grid_ = grid_;
  for (const auto& [cell, tier] : tiers_)
    if (tier > best || tier == 3) gated_grid_.hold(cell / columns_, cell % columns_);
  // Nothing may run: wake up when the first held queue opens (an arrival may open one sooner).
  if (best == 3 && first_open != std::numeric_limits<std::int64_t>::max()) arm_gate(first_open);
  return gated_grid_;
}

void Worker::arm_gate(std::int64_t at) {
  if (gate_armed_ns_ >= 0 && gate_armed_ns_ <= at) return;  // an earlier wake-up is on its way
  gate_armed_ns_ = at;
  loop_.post(at, [this, at] {
    if (gate_armed_ns_ == at) gate_armed_ns_ = -1;
    if (!running_) try_run();
  });
}

std::size_t Worker::queue_index(const LayerId& id) const {
  std::int32_t column = 0;
  if (id.kind == LayerKind::Expert) {
    assert(expert_column_[id.index] >= 0 && "expert not placed on this device");
    column = expert_column_[id.index];
  } else {
    assert(rank_ == id.index && "attention rows sent to the wrong rank");
  }
  return static_cast<std::size_t>(id.block * columns_ + column);
}

// Most arrivals join the group of the queue's first batch (one group at a time under async):
// inline, and the scan for a spare batch out of line.
inline TokenBatch& Worker::queue_tail(std::size_t qi, const LayerId& layer, std::int32_t group) {
  std::vector<TokenBatch>& batches = queues_[qi].batches;
  if (batches.empty() || batches[0].group != group) return find_queue_tail(qi, layer, group);
  TokenBatch& b = batches[0];
  if (b.empty()) b.oldest_ns = loop_.now();
  return b;
}

[[gnu::noinline]] TokenBatch& Worker::find_queue_tail(std::size_t qi, const LayerId& layer, std::int32_t group) {
  Queue& q = queues_[qi];
  // Drained batches stay, empty, for their storage: the group's own, or any empty one (grouped
  // policies tag each iteration's micro-batch anew, so their tags never come back).
  TokenBatch* spare = nullptr;
  for (TokenBatch& b : q.batches) {
    if (b.group == group) {
      if (b.empty()) b.oldest_ns = loop_.now();
      return b;
    }
    if (!spare && b.empty()) spare = &b;
  }
  if (spare) {
    spare->layer = layer;
    spare->group = group;
    spare->oldest_ns = loop_.now();
    return *spare;
  }
  q.batches.push_back(recycler_.take());
  TokenBatch& b = q.batches.back();
  b.layer = layer;
  b.group = group;
  b.oldest_ns = loop_.now();
  return b;
}

void Worker::account(std::size_t qi, std::int64_t rows) {
  Queue& q = queues_[qi];
  q.tokens += rows;
  queued_tokens_ += rows;
  grid_.set(qi, q.block, q.tokens);
}

void Worker::enqueue(TokenBatch& batch) {
  const std::int64_t rows = batch.rows();
  if (rows == 0) return;
  const std::size_t qi = queue_index(batch.layer);
  TokenBatch& tail = queue_tail(qi, batch.layer, batch.group);
  if (tail.empty()) {
    // Take the arriving rows' storage and leave the tail's (empty) storage in the shipment.
    tail.swap_rows(batch);
  } else {
    tail.append(std::move(batch));
  }
  account(qi, rows);
}

std::int32_t Worker::expected_shipments(LayerKind kind, std::int32_t block) const {
  if (kind == LayerKind::Expert) return topo_.num_ranks();
  if (block == 0) return 1;  // injected by the coordinator
  const std::int32_t prev = block - 1;
  // After a sparse block every expert device sends each of the micro-batch's chunks back.
  return topo_.sparse[prev] ? static_cast<std::int32_t>(topo_.block_expert_devices[prev].size()) * policy_.chunks()
                            : 1;
}

void Worker::announce(const ShipmentHeader& header) {
  if (header.kind == LayerKind::Expert) inbound_expert_rows_[static_cast<std::size_t>(header.block)] += header.rows;
  // The transport counts the shipment in flight before it announces it (Transport::Receiver):
  // a device stalled on a transfer, and not at a barrier, stays stalled on a transfer.
  if (stall_reason_ == StallReason::Transfer && !(policy_.grouped() && queued_tokens_ > 0)) return;
  update_stall();
}

Status Worker::check_remote(const ShipmentHeader& h) const {
  const auto refuse = [&](const std::string& why) {
    return Status::Error("a shipment header from device " + std::to_string(h.src) + " to device " +
                         std::to_string(device_) + ": " + why);
  };
  if (h.dst != device_) return refuse("it is addressed to device " + std::to_string(h.dst));
  if (h.rows < 0 || h.bytes < 0) return refuse("a negative size");
  if (h.kind == LayerKind::Expert) {
    if (h.block < 0 || h.block >= topo_.num_blocks || !topo_.sparse[static_cast<std::size_t>(h.block)])
      return refuse("expert rows for block " + std::to_string(h.block) + ", which has no experts");
  } else if (h.block < 0 || h.block > topo_.num_blocks) {
    return refuse("block " + std::to_string(h.block) + " (the model has " + std::to_string(topo_.num_blocks) + ")");
  }
  return Status::Ok();
}

Status Worker::check_remote(const Shipment& s) const {
  const auto refuse = [&](const std::string& why) {
    return Status::Error("a shipment from device " + std::to_string(s.src) + " to device " + std::to_string(device_) +
                         ": " + why);
  };
  if (s.dst != device_) return refuse("it is addressed to device " + std::to_string(s.dst));
  // Expert outputs per token-pool entry, so that a shipment cannot complete a request twice.
  std::map<std::int32_t, std::int32_t> outputs;
  for (const TokenBatch& b : s.batches) {
    const LayerId& l = b.layer;
    const auto layer = [&l] { return " of block " + std::to_string(l.block); };  // for a refusal only
    // The executors read and write hidden_size values per row (asserted only in debug builds):
    // every batch's rows carry them but block 0's attention rows, whose embedding makes them.
    const auto rows = static_cast<std::int64_t>(b.row.size());
    const bool embeds = l.kind == LayerKind::Attention && l.block == 0;
    if (rows > 0 && (b.hidden.null() ? !embeds
                                     : b.hidden.rows() != rows ||
                                           (topo_.hidden_size > 0 && b.hidden.width() != topo_.hidden_size)))
      return refuse(b.hidden.null() ? std::to_string(rows) + " rows" + layer() + " without activations"
                                    : "activations of " + std::to_string(b.hidden.rows()) + " x " +
                                          std::to_string(b.hidden.width()) + " for " + std::to_string(rows) +
                                          " rows" + layer() + " (the model's are " +
                                          std::to_string(topo_.hidden_size) + " wide)");
    if (l.kind == LayerKind::Expert) {
      if (l.block < 0 || l.block >= topo_.num_blocks || !topo_.sparse[static_cast<std::size_t>(l.block)])
        return refuse("expert rows" + layer() + ", which has no experts");
      if (l.index < 0 || l.index >= topo_.num_experts || expert_column_[static_cast<std::size_t>(l.index)] < 0)
        return refuse("rows for expert " + std::to_string(l.index) + layer() + ", which this device does not host");
      for (const TokenRow& r : b.row)
        if (r.rank < 0 || r.rank >= topo_.num_ranks())
          return refuse("an expert row of request " + std::to_string(r.request) + " for attention rank " +
                        std::to_string(r.rank) + ", which does not exist");
      continue;
    }
    if (l.kind == LayerKind::Attention ? (l.block < 0 || l.block >= topo_.num_blocks) : l.block != topo_.num_blocks)
      return refuse("rows for " + std::string(l.kind == LayerKind::Attention ? "attention" : "the sampler") + layer());
    if (rank_ < 0 || l.index != rank_) return refuse("rows for attention rank " + std::to_string(l.index));
    if (b.has(kColumnSlot)) {  // expert outputs, for the token pool
      for (const TokenRow& r : b.row) {
        if (!pool_.awaits(r, l, b.group, topo_.top_k) || ++outputs[r.entry] > pool_.outputs_awaited(r.entry))
          return refuse("an expert output (request " + std::to_string(r.request) + ", slot " + std::to_string(r.slot) +
                        ") that no request in the token pool awaits");
      }
      continue;
    }
    for (const TokenRow& r : b.row) {
      if (kv_ == nullptr || !kv_->holds(r.request))
        return refuse("rows of request " + std::to_string(r.request) + ", which is not admitted on this rank");
      const SequenceContext sc = kv_->context(r.request);
      if (r.position < 0 || r.position >= static_cast<std::int64_t>(sc.pages) * kv_->page_size())
        return refuse("position " + std::to_string(r.position) + " of request " + std::to_string(r.request) +
                      ", beyond its KV pages");
      if (b.has(kColumnRank) && r.rank != rank_)
        return refuse("a row of request " + std::to_string(r.request) + " owned by rank " + std::to_string(r.rank));
      if (b.has(kColumnToken) && topo_.vocab_size > 0 && (r.token < 0 || r.token >= topo_.vocab_size))
        return refuse("token " + std::to_string(r.token) + " of request " + std::to_string(r.request) +
                      ", not below the vocabulary's " + std::to_string(topo_.vocab_size));
    }
  }
  return Status::Ok();
}

void Worker::receive(Shipment&& shipment) {
  // Arrivals held while this device executes come first (see close_stall); an idle device's
  // lane holds nothing.
  if (running_) catch_up();
  if (shipment.kind == LayerKind::Expert) {
    // Never below zero: a transport that announces nothing leaves the count at zero.
    std::int64_t& inbound = inbound_expert_rows_[static_cast<std::size_t>(shipment.block)];
    inbound = std::max<std::int64_t>(0, inbound - shipment.tokens());
  }
  // The rows' activations arrive as the handles the sender moved: cpu devices share host
  // memory, so a handle is as good here as there. A transport between separate memories (a
  // GPU's) copies the rows into buffers of this device's pool before this sees them.
  for (TokenBatch& batch : shipment.batches) {
    if (batch.layer.kind != LayerKind::Expert && batch.has(kColumnSlot)) {
      absorb_expert_outputs(batch);
    } else {
      enqueue(batch);
    }
  }
  // The list goes back with its batches, emptied where they are, for a later dispatch to fill.
  recycler_.give_list(shipment.batches);
  if (policy_.grouped()) arrive({shipment.kind, shipment.block, shipment.group});
  // An execution that starts here closes the stall with the reason it had (close_stall): the
  // report an update would have made first, for the same interval. Only a device that stays
  // idle needs its reason brought up to date; try_run changed nothing that reason reads.
  try_run();
  if (!running_) update_stall();
}

void Worker::arrive(const GroupKey& key) {
  if (++arrived_[key] == expected_shipments(std::get<0>(key), std::get<1>(key))) {
    arrived_.erase(key);
    pending_groups_.push_back(key);
  }
}

void Worker::absorb_expert_outputs(const TokenBatch& outputs) {
  // The requests one batch of outputs completes all go to the batch's own queue (the layer
  // after the expert block, on this rank, in the batch's group: where the attention dispatch
  // held them for): without activations (sim) the queue's tail is found, and its count brought
  // up to date, once per batch rather than once per request (a decode request is a row). Nothing
  // reads the queues before the batch is absorbed. A request with activations waits for its
  // merge.
  TokenBatch* tail = nullptr;
  std::size_t qi = 0;
  std::int64_t rows = 0;
  pool_.absorb(outputs, [&](TokenPool::Completed& c) {
    if (!c.hidden.null()) return take_completed(c);
    assert(c.layer == outputs.layer && c.group == outputs.group && "outputs complete requests of their own queue");
    pooled_rows_[static_cast<std::size_t>(c.layer.block)] -= c.rows;
    if (!tail) {
      qi = queue_index(c.layer);
      tail = &queue_tail(qi, c.layer, c.group);
      tail->columns = kAttentionColumns;
    }
    for (std::int32_t i = 0; i < c.rows; ++i)
      tail->row.push_back({.request = c.request, .position = c.first_position + i, .rank = c.rank});
    rows += c.rows;
  });
  if (tail) account(qi, rows);
}

void Worker::take_completed(TokenPool::Completed& c) {
  // Every request whose K outputs per row are all back is merged into its residual by an
  // execution of its own on the device; without activations (sim) there is nothing to add
  // and its rows go straight to the layer after the expert block.
  pooled_rows_[static_cast<std::size_t>(c.layer.block)] -= c.rows;
  if (c.hidden.null()) {
    enqueue_merged(c);
  } else {
    merges_.push_back(std::move(c));
  }
}

void Worker::enqueue_merged(TokenPool::Completed& c) {
  const std::size_t qi = queue_index(c.layer);
  TokenBatch& tail = queue_tail(qi, c.layer, c.group);
  tail.columns = kAttentionColumns;
  for (std::int32_t i = 0; i < c.rows; ++i)
    tail.row.push_back({.request = c.request, .position = c.first_position + i, .rank = c.rank});
  if (!c.hidden.null()) c.hidden.owner().append(tail.hidden, std::move(c.hidden));
  account(qi, c.rows);
}

void Worker::drain(std::size_t qi, std::int32_t group, TokenBatch& out) {
  Queue& q = queues_[qi];
  // A drained batch stays in its queue, empty, for the next rows of its group: its storage
  // is reused in place rather than cycled through the recycler.
  for (TokenBatch& b : q.batches) {
    if ((group >= 0 && b.group != group) || b.empty()) continue;
    const std::int64_t rows = b.rows();
    q.tokens -= rows;
    queued_tokens_ -= rows;
    if (observer_) observer_->on_queue_wait(device_, b.layer, rows, loop_.now() - b.oldest_ns, loop_.now());
    if (out.empty()) {
      out.layer = b.layer;
      out.group = b.group;
      out.oldest_ns = b.oldest_ns;
      // `out` comes empty (a job's batches are emptied when it ends, spares
      // when they are given back), so b is left empty by the swap: no clear needed.
      out.swap_rows(b);
      assert(b.empty() && b.hidden.null());
    } else {
      out.oldest_ns = std::min(out.oldest_ns, b.oldest_ns);
      out.append(std::move(b));
      b.clear();
    }
  }
  grid_.set(qi, q.block, q.tokens);
}

bool Worker::take_async_job() {
  if (queued_tokens_ == 0) return false;  // most arrivals only fill the token pool
  auto pick = scheduler_->pick(open_queues());
  if (!pick) return false;
  const std::int32_t expert = column_expert_.empty() ? -1 : column_expert_[pick->column];
  const auto qi = static_cast<std::size_t>(pick->block * columns_ + pick->column);
  job_.block = pick->block;
  job_.group = -1;
  if (expert >= 0) {
    job_.kind = LayerKind::Expert;
    job_.index = expert;
    // The job keeps its batches between executions (emptied by try_run): one is filled here.
    if (job_.per_expert.empty()) job_.per_expert.push_back(recycler_.take());
    recycler_.trim_list(job_.per_expert, 1);
    drain(qi, -1, job_.per_expert[0]);
  } else {
    job_.kind = pick->block == topo_.num_blocks ? LayerKind::Sampler : LayerKind::Attention;
    job_.index = rank_;
    drain(qi, -1, job_.batch);
  }
  return true;
}

bool Worker::take_shared_job() {
  if (shared_jobs_.empty()) return false;
  job_.kind = LayerKind::Attention;
  job_.shared = true;
  job_.block = shared_jobs_.front().layer.block;
  job_.index = rank_;
  job_.group = shared_jobs_.front().group;
  job_.batch.swap_rows(shared_jobs_.front());
  recycler_.give(std::move(shared_jobs_.front()));
  shared_jobs_.pop_front();
  return true;
}

bool Worker::take_grouped_job() {
  if (pending_groups_.empty()) return false;
  auto [kind, block, group] = pending_groups_.front();
  pending_groups_.pop_front();
  job_.kind = kind;
  job_.block = block;
  job_.group = group;
  if (kind == LayerKind::Expert) {
    job_.index = -1;  // every expert of the block hosted here, as one grouped execution
    std::size_t filled = 0;  // the job's (emptied) batches are filled in place, the empty ones dropped
    for (std::int32_t c = 0; c < columns_; ++c) {
      if (column_expert_[c] < 0) continue;
      if (filled == job_.per_expert.size()) job_.per_expert.push_back(recycler_.take());
      drain(static_cast<std::size_t>(block * columns_ + c), group, job_.per_expert[filled]);
      if (!job_.per_expert[filled].empty()) ++filled;
    }
    recycler_.trim_list(job_.per_expert, filled);
  } else {
    job_.index = rank_;
    drain(static_cast<std::size_t>(block * columns_), group, job_.batch);
  }
  return true;
}

void Worker::try_run() {
  if (running_) return;
  // The last job's batches were emptied when it ended (run_next_or_stall): most calls come
  // from arrivals at an idle device that find nothing to run, and need not empty them again.
  job_.tokens = 0;
  job_.shared = false;
  // Merges first: a grouped policy's next micro-batch, or an async scheduler's next pick, may
  // be waiting for exactly these rows.
  if (!merges_.empty()) {
    execute_merges();
    return;
  }
  // findep's order (FinDEP §3.2): ASAS runs a micro-batch's shared expert before the next
  // attention; AASS runs attention whenever one is ready and the shared experts in the gaps.
  const bool shared_first = policy_.order == SharedExpertOrder::Asas;
  bool found = shared_first && take_shared_job();
  if (!found) found = policy_.grouped() ? take_grouped_job() : take_async_job();
  if (!found) found = !shared_first && take_shared_job();
  if (!found) return;
  execute();
}

void Worker::close_stall() {
  if (stalled_) {
    if (observer_ && loop_.now() > stall_start_) observer_->on_stall(device_, stall_reason_, stall_start_, loop_.now());
    stalled_ = false;
  }
  running_ = true;
  job_.start = loop_.now();
  // Until this execution completes, an arrival here only fills the queues and the token pool
  // (receive's try_run finds the device running, update_stall finds it not stalled), and
  // nothing reads those before the completion: a virtual loop may hold the arrivals back and
  // run them, each at its own time and in its own order, when the device catches up (at the
  // completion, at an earlier arrival it could not hold, or when queue_depths reads them).
  if (lane_) lane_->held = true;
}

void Worker::collect_sequences() {
  job_.sequences.clear();
  if (!executor_.reads_sequences()) return;
  assert(kv_ && "attention rows on a device without an attention rank");
  job_.batch.for_each_request([&](std::int64_t first, std::int64_t) {
    job_.sequences.push_back(kv_->context(job_.batch.at(first).request));
  });
}

void Worker::execute() {
  close_stall();
  const Completion done = Completion::of<Worker, &Worker::finish>(this);
  if (job_.kind == LayerKind::Expert) {
    std::vector<TokenBatch*>& batches = job_.expert_batches;
    batches.clear();
    for (TokenBatch& b : job_.per_expert) {
      job_.tokens += b.rows();
      batches.push_back(&b);
    }
    if (job_.tokens > 0) return executor_.experts(job_.block, batches, done);
  } else {
    job_.tokens = job_.batch.rows();
    job_.routed.shared_pending = false;
    if (job_.shared) return executor_.shared_expert(job_.block, job_.batch, done);
    if (job_.tokens > 0) {
      collect_sequences();
      job_.routed.shared_apart = policy_.shared_expert_apart();
      if (job_.kind == LayerKind::Attention)
        return executor_.attention(job_.block, job_.batch, job_.sequences, job_.routed, done);
      return executor_.sample(job_.batch, job_.sequences, job_.next_tokens, job_.next_logprobs, job_.prompt_logprobs,
                              done);
    }
  }
  // A grouped policy's empty micro-batch: nothing for the device, but the barrier still moves.
  loop_.post(job_.start, [this] { finish({job_.start, job_.start}); });
}

void Worker::execute_merges() {
  close_stall();
  job_.merges.swap(merges_);
  job_.block = job_.merges.front().layer.block - 1;  // the expert block whose outputs these are
  for (const TokenPool::Completed& c : job_.merges) job_.tokens += c.rows;
  executor_.merge(job_.merges, Completion::of<Worker, &Worker::finish_merges>(this));
}

void Worker::finish_merges(ExecutionTiming timing) {
  catch_up();
  if (observer_) observer_->on_merge(device_, job_.block, job_.tokens, timing.start_ns, timing.end_ns);
  for (TokenPool::Completed& c : job_.merges) enqueue_merged(c);
  job_.merges.clear();
  run_next_or_stall(loop_.now());
}

void Worker::run_next_or_stall(std::int64_t idle_since) {
  running_ = false;
  job_.batch.clear();
  for (TokenBatch& b : job_.per_expert) b.clear();
  try_run();
  if (!running_) {
    // Idle: every arrival from now on may start an execution, so each is an event again.
    if (lane_) {
      lane_->held = false;
      if (lane_->waiting > 0) loop_.release_lane(device_);
    }
    stalled_ = true;
    stall_start_ = idle_since;
    stall_reason_ = current_stall_reason();
  }
}

void Worker::finish(ExecutionTiming timing) {
  catch_up();
  const std::int64_t end = loop_.now();
  // An expert job's group is a chunk of a micro-batch (findep); telemetry names the micro-batch.
  const std::int32_t group = job_.kind == LayerKind::Expert ? micro_batch_of(job_.group) : job_.group;
  if (job_.shared) {
    if (observer_) observer_->on_shared_expert(device_, job_.block, group, job_.tokens, timing.start_ns, timing.end_ns);
    dispatch_shared_expert();
    return run_next_or_stall(end);
  }
  if (observer_ && job_.tokens > 0) {
    // A sampler execution computes logits for each sequence's last row alone and samples one
    // token there: its size is the tokens it sampled. A prompt's other rows only pass through,
    // and counted they made a prefill's sampler span claim its prompt as output tokens; a
    // non-final chunk of a prompt (chunked prefill) samples nothing.
    std::int64_t tokens = job_.tokens;
    if (job_.kind == LayerKind::Sampler) {
      tokens = static_cast<std::int64_t>(job_.next_tokens.size());
      if (kv_ != nullptr)
        job_.batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
          if (kv_->mid_prompt(job_.batch.at(first).request, job_.batch.at(first + rows - 1).position)) --tokens;
        });
    }
    observer_->on_execution(device_, job_.kind, job_.block, job_.index, group, tokens, timing.start_ns, timing.end_ns);
  }
  switch (job_.kind) {
    case LayerKind::Attention: dispatch_attention(); break;
    case LayerKind::Expert: dispatch_experts(); break;
    case LayerKind::Sampler: dispatch_sampler(); break;
  }
  run_next_or_stall(end);
}

// Out of line: inlined, its hash of the row was hoisted out of dispatch_attention's top-k loop and
// computed for every row, though only an expert with replicas needs it (about 25 instructions a row).
[[gnu::noinline]] std::int32_t Worker::choose_replica(std::int32_t block, std::int32_t expert,
                                                     std::int64_t request, std::int32_t row) const {
  const auto& devices = topo_.placement.devices(block, expert);
  assert(!devices.empty());
  if (devices.size() == 1) return devices[0];
  // Spread rows over replicas by a hash, so a token's destination does not depend on timing.
  const std::uint64_t h = mix(static_cast<std::uint64_t>(request) * 1000003u + static_cast<std::uint64_t>(row) * 31u +
                              static_cast<std::uint64_t>(block));
  return devices[h % devices.size()];
}

// Most calls open the first batch to a device that the last shipment there left in its list:
// inline, without the search and the recycler's path (a call of those cost about fifteen
// instructions per batch on top of what it did).
inline std::size_t Worker::outgoing_index(std::int32_t device, const LayerId& layer, std::int32_t group) {
  std::vector<TokenBatch>& batches = outgoing_[static_cast<std::size_t>(device)];
  std::size_t& used = outgoing_used_[static_cast<std::size_t>(device)];
  if (used != 0 || batches.empty()) return add_outgoing(device, layer, group);
  touched_.push_back(device);
  TokenBatch& b = batches[0];
  b.layer = layer;
  b.group = group;
  b.columns = outgoing_columns(layer);
  used = 1;
  return 0;
}

[[gnu::noinline]] std::size_t Worker::add_outgoing(std::int32_t device, const LayerId& layer, std::int32_t group) {
  std::vector<TokenBatch>& batches = outgoing_[static_cast<std::size_t>(device)];
  std::size_t& used = outgoing_used_[static_cast<std::size_t>(device)];
  if (used == 0) touched_.push_back(device);
  for (std::size_t i = 0; i < used; ++i)
    if (batches[i].layer == layer) return i;
  TokenBatch* const before = batches.data();
  TokenBatch& b = used < batches.size() ? batches[used] : recycler_.take_into(batches);
  // A new batch may have moved the list: dispatch_attention's addresses into it are stale.
  if (batches.data() != before) ++out_epoch_;
  b.layer = layer;
  b.group = group;
  b.columns = outgoing_columns(layer);
  return used++;
}

std::vector<SourceRow>& Worker::gather_list(std::int32_t device, std::size_t batch) {
  auto& lists = gather_rows_[static_cast<std::size_t>(device)];
  if (lists.size() <= batch) lists.resize(batch + 1);
  return lists[batch];
}

void Worker::gather_outgoing(ActivationOps& ops) {
  for (std::int32_t d : touched_) {
    auto& batches = outgoing_[static_cast<std::size_t>(d)];
    auto& lists = gather_rows_[static_cast<std::size_t>(d)];
    const std::size_t used = outgoing_used_[static_cast<std::size_t>(d)];
    for (std::size_t i = 0; i < used && i < lists.size(); ++i) {
      if (lists[i].empty()) continue;
      ops.gather(lists[i], batches[i].hidden);
      lists[i].clear();
    }
  }
}

void Worker::send_outgoing(LayerKind kind, std::int32_t block, std::int32_t group,
                           const std::vector<std::int32_t>& always) {
  // Grouped policies ship to every expected receiver, rows or not: that is their barrier.
  for (std::int32_t d : always)
    if (outgoing_used_[static_cast<std::size_t>(d)] == 0 &&
        std::find(touched_.begin(), touched_.end(), d) == touched_.end())
      touched_.push_back(d);
  // Shipments leave in ascending order of destination. A dispatch touches a few devices:
  // sorted by insertion in place (what std::sort does below 16 elements, without its two calls
  // and a memmove per element).
  const std::size_t n = touched_.size();
  if (n <= 16) {
    for (std::size_t i = 1; i < n; ++i) {
      const std::int32_t d = touched_[i];
      std::size_t j = i;
      for (; j > 0 && touched_[j - 1] > d; --j) touched_[j] = touched_[j - 1];
      touched_[j] = d;
    }
  } else {
    std::sort(touched_.begin(), touched_.end());
  }
  for (std::int32_t d : touched_) {
    auto& batches = outgoing_[static_cast<std::size_t>(d)];
    std::size_t& used = outgoing_used_[static_cast<std::size_t>(d)];
    recycler_.trim_list(batches, used);
    if (observer_ && kind == LayerKind::Expert)
      for (const TokenBatch& b : batches) observer_->on_routed(block, b.layer.index, d, b.rows(), loop_.now());
    // The shipment is a member, its list empty since the last send moved it: a local (and
    // std::swap's temporary) cost two out-of-line destructors of empty lists per shipment.
    shipment_.src = device_;
    shipment_.dst = d;
    shipment_.kind = kind;
    shipment_.block = block;
    shipment_.group = group;
    shipment_.batches.swap(batches);
    // The next shipment to d likely carries as many batches: ask for a list of that length.
    recycler_.take_list(used, batches);
    used = 0;
    transport_.send(std::move(shipment_));
  }
  touched_.clear();
}

void Worker::dispatch_attention() {
  static const std::vector<std::int32_t> kNone;
  const std::int32_t b = job_.block;
  const std::int32_t last = topo_.num_blocks;
  const LayerId next_layer = b + 1 == last ? LayerId::sampler(last, rank_) : LayerId::attention(b + 1, rank_);
  TokenBatch& batch = job_.batch;
  // Block 0's rows carried the token to embed; nothing after reads it.
  batch.columns &= static_cast<std::uint8_t>(~kColumnToken);

  if (!topo_.sparse[b]) {
    // Dense block: the MLP ran with the attention; the rows stay on this rank.
    batch.layer = next_layer;
    Shipment local{device_, device_, next_layer.kind, b + 1, job_.group, {}};
    if (!batch.empty()) local.batches.push_back(std::move(batch));
    if (!local.batches.empty() || policy_.grouped()) transport_.send(std::move(local));
    return;
  }

  const std::int32_t K = topo_.top_k;
  const RoutedRows& routed = job_.routed;
  ActivationOps* activations = routed.ffn_in.null() ? nullptr : &routed.ffn_in.owner();
  // Permute by expert: one outgoing batch per (device, expert); each row travels K times. An
  // expert with one replica always lands in the same batch: remember it, per chunk, by address
  // (an index cost a look at the expert's replicas and two indexings per copy of a row).
  // The rows' activations follow in one gather per outgoing batch.
  expert_out_.resize(static_cast<std::size_t>(topo_.num_experts));
  const auto& replicas = topo_.placement.block_devices(b);
  // findep cuts the micro-batch's rows into r2 chunks, each shipped as a group of its own
  // (group · r2 + chunk) so that an expert device can start on chunk 0 while chunk 1 is still
  // on the wire; other policies ship one chunk whose group is the micro-batch's.
  const std::int32_t chunks = policy_.chunks();
  const std::int64_t total_rows = batch.rows();
  // The residual waits in the token pool until every expert output of every row is back. It is
  // held before the sends, which copy the entry hold() writes into each row into the expert
  // rows, whose outputs bring it back to the pool: no output can return before the sends,
  // since an expert's output comes from an execution that completes on a later event of the
  // loop. The batch stays for the sends (and a shared job) to read.
  const bool shared_apart = job_.routed.shared_pending;
  batch.layer = next_layer;
  batch.group = job_.group;
  pooled_rows_[static_cast<std::size_t>(next_layer.block)] += batch.rows();
  pool_.hold(batch, K, std::move(job_.routed.shared_out), shared_apart);
  // The rows and routing read per row, held in locals: a store into an outgoing batch's vector
  // might alias these vectors' pointers as far as the compiler knows, and it reloaded every one
  // of them for each of the K copies of a row. Nothing in the loop resizes them.
  const TokenRow* const in = batch.row.data();
  const std::int32_t* const expert_ids = routed.expert_ids.data();
  const float* const expert_weights = routed.expert_weights.data();
  OutgoingRef* const expert_out = expert_out_.data();
  for (std::int32_t chunk = 0; chunk < chunks; ++chunk) {
    const std::int64_t lo = total_rows * chunk / chunks;
    const std::int64_t hi = total_rows * (chunk + 1) / chunks;
    const std::int32_t sub_group = job_.group < 0 ? job_.group : job_.group * chunks + chunk;
    // One pass over the chunk's rows; `first` is where the row's request starts (its rows are
    // contiguous), found by looking back from the chunk's first row. A pass per request (with
    // for_each_request) cost the loop's setup once per row: a decode request has one row.
    std::int64_t first = lo;
    while (first > 0 && lo < hi && in[first - 1].request == in[lo].request) --first;
    for (std::int64_t i = lo; i < hi; ++i) {
      const std::int64_t request = in[i].request;
      const std::int32_t rank = in[i].rank;
      const std::int32_t entry = in[i].entry;
      if (request != in[first].request) first = i;
      const auto row = static_cast<std::size_t>(i);
      const std::int64_t r = i - first;
      for (std::int32_t k = 0; k < K; ++k) {
        const std::size_t rk = row * static_cast<std::size_t>(K) + static_cast<std::size_t>(k);
        const std::int32_t e = expert_ids[rk];
        OutgoingRef& cached = expert_out[e];
        TokenBatch* out = cached.batch;
        std::int32_t d = cached.device;
        auto at = static_cast<std::size_t>(cached.index);
        if (cached.epoch != out_epoch_) {
          const auto& devices = replicas[static_cast<std::size_t>(e)];
          const bool single = devices.size() == 1;
          d = single ? devices[0] : choose_replica(b, e, request, static_cast<std::int32_t>(r));
          at = outgoing_index(d, LayerId::expert(b, e), sub_group);
          out = &outgoing_[static_cast<std::size_t>(d)][at];
          if (single) cached = {out, out_epoch_, d, static_cast<std::int32_t>(at)};
        }
        out->row.push_back({.request = request,
                            .rank = rank,
                            .slot = static_cast<std::int32_t>(r) * K + k,
                            .weight = expert_weights[rk],
                            .entry = entry});
        if (activations) gather_list(d, at).push_back({&routed.ffn_in, static_cast<std::int64_t>(row)});
      }
    }
    ++out_epoch_;
    if (activations) gather_outgoing(*activations);
    send_outgoing(LayerKind::Expert, b, sub_group, policy_.grouped() ? topo_.block_expert_devices[b] : kNone);
  }
  if (shared_apart) {
    // findep: the shared expert runs later on this device, over the same ffn input rows; the
    // micro-batch's next layer also waits for it (one more arrival for its group key).
    TokenBatch& shared = shared_jobs_.emplace_back(recycler_.take());
    shared.layer = LayerId::attention(b, rank_);
    shared.group = job_.group;
    shared.row = batch.row;
    shared.columns = batch.columns;
    shared.hidden = std::move(job_.routed.ffn_in);
    if (policy_.grouped())
      --arrived_[{b + 1 == last ? LayerKind::Sampler : LayerKind::Attention, b + 1, job_.group}];
  }
  if (activations) job_.routed.ffn_in.reset();
}

void Worker::dispatch_shared_expert() {
  // Its rows join the token pool; requests whose expert outputs are back too are merged.
  const std::int32_t b = job_.block;
  pool_.absorb_shared(job_.batch, [this](TokenPool::Completed& c) { take_completed(c); });
  if (policy_.grouped())
    arrive({b + 1 == topo_.num_blocks ? LayerKind::Sampler : LayerKind::Attention, b + 1, job_.group});
}

void Worker::dispatch_experts() {
  static const std::vector<std::int32_t> kNone;
  const std::int32_t b = job_.block;
  const std::int32_t last = topo_.num_blocks;
  const LayerKind next_kind = b + 1 == last ? LayerKind::Sampler : LayerKind::Attention;
  const std::int32_t group = micro_batch_of(job_.group);  // the chunk's outputs rejoin their micro-batch
  // Permute by attention rank: each row goes back to the rank that holds its request's KV;
  // the outputs' activations follow in one gather per rank.
  rank_out_.resize(static_cast<std::size_t>(topo_.num_ranks()));
  ++out_epoch_;
  ActivationOps* activations = nullptr;
  for (const TokenBatch& tb : job_.per_expert)
    if (!tb.hidden.null()) activations = &tb.hidden.owner();
  const std::int32_t* const rank_device = topo_.rank_device.data();
  OutgoingRef* const rank_out = rank_out_.data();
  for (const TokenBatch& tb : job_.per_expert) {
    const std::int64_t rows = tb.rows();
    // The rows read, held in a local (as in dispatch_attention): a store into an outgoing
    // batch's vector might alias the vector's pointer as far as the compiler knows. Expert rows
    // carry a rank, a slot and a weight each (TokenBatch): dispatch_attention makes them so,
    // and a shipment from another process with other expert rows is refused when it is decoded.
    assert((rows == 0 || (tb.columns & kExpertColumns) == kExpertColumns) && "expert rows carry rank, slot and weight");
    const TokenRow* const in = tb.row.data();
    for (std::int64_t r = 0; r < rows; ++r) {
      const std::int32_t rank = in[r].rank;
      OutgoingRef& cached = rank_out[rank];
      if (cached.epoch != out_epoch_) {
        const std::int32_t d = rank_device[rank];
        const LayerId layer = next_kind == LayerKind::Sampler ? LayerId::sampler(last, rank) : LayerId::attention(b + 1, rank);
        const std::size_t at = outgoing_index(d, layer, group);
        cached = {&outgoing_[static_cast<std::size_t>(d)][at], out_epoch_, d, static_cast<std::int32_t>(at)};
      }
      // An expert output row carries its request and top-k slot only: the token pool that
      // takes it reads nothing else (TokenBatch), and three of five columns per row were
      // copied for nobody.
      TokenBatch& out = *cached.batch;
      out.row.push_back({.request = in[r].request, .slot = in[r].slot, .entry = in[r].entry});
      if (activations) gather_list(cached.device, static_cast<std::size_t>(cached.index)).push_back({&tb.hidden, r});
    }
  }
  if (activations) gather_outgoing(*activations);
  send_outgoing(next_kind, b + 1, group, policy_.grouped() ? topo_.rank_device : kNone);
}

void Worker::dispatch_sampler() {
  // Before the sampled tokens: a request's token may finish it, and its prompt's numbers must
  // be out by then.
  if (hooks_.on_prompt_logprobs)
    for (const PromptLogprobs& p : job_.prompt_logprobs) hooks_.on_prompt_logprobs(p);
  job_.prompt_logprobs.clear();
  std::size_t i = 0;
  job_.batch.for_each_request([&](std::int64_t first, std::int64_t rows) {
    const std::int64_t request = job_.batch.at(first).request;
    // A chunk of a prompt that is not its last draws no token: the executor's draw from its
    // last row is no output (it would enter the penalties' list and the stream).
    if (kv_ != nullptr && kv_->mid_prompt(request, job_.batch.at(first + rows - 1).position)) {
      hooks_.on_sampled(request, kNoToken, nullptr);
      ++i;
      return;
    }
    const kernels::TokenLogprobs* lp =
        i < job_.next_logprobs.size() && job_.next_logprobs[i].token >= 0 ? &job_.next_logprobs[i] : nullptr;
    if (kv_ != nullptr) kv_->sampled(request, job_.next_tokens[i]);  // before the hook: it may release
    hooks_.on_sampled(request, job_.next_tokens[i], lp);
    ++i;
  });
  if (policy_.grouped()) hooks_.on_group_sampled(rank_, job_.group);
}

StallReason Worker::current_stall_reason() const {
  if (policy_.grouped() && queued_tokens_ > 0) return StallReason::Barrier;
  if (transport_.in_flight_to(device_) > 0) return StallReason::Transfer;
  if (weights_wait_) return StallReason::Weights;
  return StallReason::QueueEmpty;
}

void Worker::update_stall() {
  if (!stalled_) return;
  const StallReason reason = current_stall_reason();
  if (reason == stall_reason_) return;
  if (observer_ && loop_.now() > stall_start_) observer_->on_stall(device_, stall_reason_, stall_start_, loop_.now());
  stall_reason_ = reason;
  stall_start_ = loop_.now();
}

void Worker::flush_stall() {
  if (!stalled_) return;
  if (observer_ && loop_.now() > stall_start_) observer_->on_stall(device_, stall_reason_, stall_start_, loop_.now());
  stall_start_ = loop_.now();
}

std::vector<Worker::QueueDepth> Worker::queue_depths() {
  catch_up();
  std::vector<QueueDepth> out;
  for (std::int32_t b = 0; b <= topo_.num_blocks; ++b) {
    for (std::int32_t c = 0; c < columns_; ++c) {
      const Queue& q = queues_[static_cast<std::size_t>(b * columns_ + c)];
      if (q.tokens == 0) continue;
      const std::int32_t e = column_expert_.empty() ? -1 : column_expert_[c];
      const LayerId id = e >= 0 ? LayerId::expert(b, e)
                                : (b == topo_.num_blocks ? LayerId::sampler(b, rank_) : LayerId::attention(b, rank_));
      std::int64_t oldest = std::numeric_limits<std::int64_t>::max();
      for (const TokenBatch& batch : q.batches)
        if (!batch.empty()) oldest = std::min(oldest, batch.oldest_ns);
      out.push_back({id, q.tokens, oldest});
    }
  }
  return out;
}

}  // namespace sy
