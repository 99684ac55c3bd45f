#include "engine/runtime/worker.h"

#include <algorithm>
#include <cassert>

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
               Transport& transport, RuntimeObserver* observer, Hooks hooks)
    : device_(device),
      topo_(topology),
      loop_(loop),
      executor_(executor),
      transport_(transport),
      observer_(observer),
      hooks_(std::move(hooks)) {
  rank_ = topo_.device_rank[device];
  expert_column_.assign(static_cast<std::size_t>(topo_.num_experts), -1);
  if (rank_ >= 0) column_expert_.push_back(-1);
  for (std::int32_t e : topo_.device_expert_ids[device]) {
    expert_column_[e] = static_cast<std::int32_t>(column_expert_.size());
    column_expert_.push_back(e);
  }
  columns_ = std::max<std::int32_t>(1, static_cast<std::int32_t>(column_expert_.size()));
  queues_.resize(static_cast<std::size_t>((topo_.num_blocks + 1) * columns_));
  set_policy(RuntimePolicy{});
  stalled_ = true;
  stall_start_ = loop_.now();
}

void Worker::set_policy(const RuntimePolicy& policy) {
  assert(quiescent());
  auto scheduler = make_scheduler(policy.scheduler);
  assert(scheduler.ok());  // validated by the caller
  policy_ = policy;
  scheduler_ = std::move(scheduler).value();
  arrived_.clear();
}

std::int32_t Worker::column_of(const LayerId& id) const {
  if (id.kind == LayerKind::Expert) {
    assert(expert_column_[id.index] >= 0 && "expert not placed on this device");
    return expert_column_[id.index];
  }
  assert(rank_ == id.index && "attention packet sent to the wrong rank");
  return 0;
}

Worker::Queue& Worker::queue_for(const LayerId& id) {
  return queues_[static_cast<std::size_t>(id.block * columns_ + column_of(id))];
}

void Worker::enqueue(TokenPacket&& packet) {
  packet.enqueued_ns = loop_.now();
  Queue& q = queue_for(packet.layer);
  q.tokens += packet.rows;
  queued_tokens_ += packet.rows;
  q.packets.push_back(std::move(packet));
}

std::int32_t Worker::expected_shipments(LayerKind kind, std::int32_t block) const {
  if (kind == LayerKind::Expert) return topo_.num_ranks();
  if (block == 0) return 1;  // injected by the coordinator
  const std::int32_t prev = block - 1;
  return topo_.sparse[prev] ? static_cast<std::int32_t>(topo_.block_expert_devices[prev].size()) : 1;
}

void Worker::receive(Shipment&& shipment) {
  for (TokenPacket& p : shipment.packets) {
    if (p.layer.kind != LayerKind::Expert && !p.slots.empty()) {
      absorb_expert_output(std::move(p));
    } else {
      enqueue(std::move(p));
    }
  }
  if (policy_.grouped()) {
    const GroupKey key{shipment.kind, shipment.block, shipment.group};
    if (++arrived_[key] == expected_shipments(shipment.kind, shipment.block)) {
      arrived_.erase(key);
      pending_groups_.push_back(key);
    }
  }
  update_stall();
  try_run();
}

void Worker::absorb_expert_output(TokenPacket&& packet) {
  std::optional<TokenPool::Completed> done = pool_.absorb(packet);
  if (!done) return;
  // All K outputs of every row are here: merge into the residual and queue the next layer.
  TokenPacket merged = std::move(done->residual);
  executor_.merge(merged, done->slot_outputs, done->shared_out);
  merged.layer = packet.layer;
  enqueue(std::move(merged));
}

void Worker::drain(Queue& q, std::int32_t group, std::vector<TokenPacket>& out) {
  if (group < 0) {
    for (auto& p : q.packets) out.push_back(std::move(p));
    queued_tokens_ -= q.tokens;
    q.packets.clear();
    q.tokens = 0;
    return;
  }
  for (auto it = q.packets.begin(); it != q.packets.end();) {
    if (it->group == group) {
      q.tokens -= it->rows;
      queued_tokens_ -= it->rows;
      out.push_back(std::move(*it));
      it = q.packets.erase(it);
    } else {
      ++it;
    }
  }
}

bool Worker::take_async_job(Job& job) {
  grid_.reset(topo_.num_blocks + 1, columns_);
  for (std::size_t i = 0; i < queues_.size(); ++i) grid_.tokens[i] = queues_[i].tokens;
  auto pick = scheduler_->pick(grid_);
  if (!pick) return false;
  const std::int32_t expert = column_expert_.empty() ? -1 : column_expert_[pick->column];
  job.block = pick->block;
  if (expert >= 0) {
    job.kind = LayerKind::Expert;
    job.index = expert;
  } else {
    job.kind = pick->block == topo_.num_blocks ? LayerKind::Sampler : LayerKind::Attention;
    job.index = rank_;
  }
  drain(queues_[static_cast<std::size_t>(pick->block * columns_ + pick->column)], -1, job.packets);
  return true;
}

bool Worker::take_grouped_job(Job& job) {
  if (pending_groups_.empty()) return false;
  auto [kind, block, group] = pending_groups_.front();
  pending_groups_.pop_front();
  job.kind = kind;
  job.block = block;
  job.group = group;
  if (kind == LayerKind::Expert) {
    job.index = -1;  // every expert of the block hosted here, as one grouped execution
    for (std::int32_t c = 0; c < columns_; ++c) {
      if (column_expert_[c] >= 0) drain(queues_[static_cast<std::size_t>(block * columns_ + c)], group, job.packets);
    }
  } else {
    job.index = rank_;
    drain(queues_[static_cast<std::size_t>(block * columns_)], group, job.packets);
  }
  return true;
}

void Worker::try_run() {
  if (running_) return;
  auto job = std::make_shared<Job>();
  const bool found = policy_.grouped() ? take_grouped_job(*job) : take_async_job(*job);
  if (!found) return;
  execute(std::move(job));
}

void Worker::execute(std::shared_ptr<Job> job) {
  if (stalled_) {
    if (observer_ && loop_.now() > stall_start_) observer_->on_stall(device_, stall_reason_, stall_start_, loop_.now());
    stalled_ = false;
  }
  running_ = true;
  job->start = loop_.now();
  std::vector<TokenPacket*> ptrs;
  for (auto& p : job->packets) {
    ptrs.push_back(&p);
    job->tokens += p.rows;
  }
  std::int64_t duration = 0;
  if (!ptrs.empty()) {
    switch (job->kind) {
      case LayerKind::Attention:
        job->routed.resize(ptrs.size());
        duration = executor_.attention(job->block, ptrs, job->routed);
        break;
      case LayerKind::Expert: {
        std::vector<ExpertBatch> batches;
        for (auto* p : ptrs) {
          auto it = std::find_if(batches.begin(), batches.end(), [&](const ExpertBatch& b) { return b.expert == p->layer.index; });
          if (it == batches.end()) {
            batches.push_back({p->layer.index, {}});
            it = batches.end() - 1;
          }
          it->packets.push_back(p);
        }
        std::sort(batches.begin(), batches.end(), [](const auto& a, const auto& b) { return a.expert < b.expert; });
        duration = executor_.experts(job->block, batches);
        break;
      }
      case LayerKind::Sampler:
        duration = executor_.sample(ptrs, job->next_tokens);
        break;
    }
  }
  loop_.post(job->start + duration, [this, job] { finish(job); });
}

void Worker::finish(const std::shared_ptr<Job>& job) {
  const std::int64_t end = loop_.now();
  if (observer_ && !job->packets.empty())
    observer_->on_execution(device_, job->kind, job->block, job->index, job->group, job->tokens, job->start, end);
  switch (job->kind) {
    case LayerKind::Attention: dispatch_attention(*job); break;
    case LayerKind::Expert: dispatch_experts(*job); break;
    case LayerKind::Sampler: dispatch_sampler(*job); break;
  }
  running_ = false;
  try_run();
  if (!running_) {
    stalled_ = true;
    stall_start_ = end;
    stall_reason_ = current_stall_reason();
  }
}

std::int32_t Worker::choose_replica(std::int32_t block, std::int32_t expert, std::int64_t request,
                                    std::int32_t row) const {
  const auto& devices = topo_.expert_devices[block][expert];
  assert(!devices.empty());
  if (devices.size() == 1) return devices[0];
  // Spread rows over replicas by a hash, so a token's destination does not depend on timing.
  const std::uint64_t h = mix(static_cast<std::uint64_t>(request) * 1000003u + static_cast<std::uint64_t>(row) * 31u +
                              static_cast<std::uint64_t>(block));
  return devices[h % devices.size()];
}

void Worker::dispatch_attention(Job& job) {
  const std::int32_t b = job.block;
  const std::int32_t last = topo_.num_blocks;
  const LayerId next_layer = b + 1 == last ? LayerId::sampler(last, rank_) : LayerId::attention(b + 1, rank_);
  const LayerKind next_kind = next_layer.kind;

  if (!topo_.sparse[b]) {
    // Dense block: the MLP ran with the attention; the tokens stay on this rank.
    Shipment local{device_, device_, next_kind, b + 1, job.group, {}};
    for (TokenPacket& p : job.packets) {
      p.layer = next_layer;
      p.tokens.clear();
      local.packets.push_back(std::move(p));
    }
    if (!local.packets.empty() || policy_.grouped()) transport_.send(std::move(local));
    return;
  }

  const std::int32_t K = topo_.top_k;
  // One outgoing shipment per expert device; one packet per (request, expert) within it.
  std::map<std::int32_t, Shipment> out;
  if (policy_.grouped()) {
    for (std::int32_t d : topo_.block_expert_devices[b]) out[d] = Shipment{device_, d, LayerKind::Expert, b, job.group, {}};
  }
  for (std::size_t i = 0; i < job.packets.size(); ++i) {
    TokenPacket& p = job.packets[i];
    RoutedRows& routed = job.routed[i];
    const std::size_t width = p.rows > 0 ? routed.ffn_in.size() / static_cast<std::size_t>(p.rows) : 0;
    std::map<std::pair<std::int32_t, std::int32_t>, TokenPacket> by_dest;  // (device, expert)
    for (std::int32_t r = 0; r < p.rows; ++r) {
      for (std::int32_t k = 0; k < K; ++k) {
        const std::int32_t e = routed.expert_ids[static_cast<std::size_t>(r * K + k)];
        const std::int32_t d = choose_replica(b, e, p.request, r);
        TokenPacket& ep = by_dest[{d, e}];
        if (ep.rows == 0) {
          ep.request = p.request;
          ep.layer = LayerId::expert(b, e);
          ep.rank = p.rank;
          ep.group = p.group;
          ep.start_pos = p.start_pos;
        }
        ++ep.rows;
        ep.slots.push_back(r * K + k);
        ep.weights.push_back(routed.expert_weights[static_cast<std::size_t>(r * K + k)]);
        if (width > 0) {
          ep.hidden.insert(ep.hidden.end(), routed.ffn_in.begin() + static_cast<std::ptrdiff_t>(r * width),
                           routed.ffn_in.begin() + static_cast<std::ptrdiff_t>((r + 1) * width));
        }
      }
    }
    for (auto& [key, ep] : by_dest) {
      if (observer_) observer_->on_routed(b, key.second, key.first, ep.rows, loop_.now());
      auto [it, inserted] = out.try_emplace(key.first, Shipment{device_, key.first, LayerKind::Expert, b, job.group, {}});
      it->second.packets.push_back(std::move(ep));
    }
    // The residual waits in the token pool until every expert output of every row is back.
    p.tokens.clear();
    p.layer = next_layer;
    pool_.hold(std::move(p), K, static_cast<std::int64_t>(width), std::move(routed.shared_out));
  }
  for (auto& [d, shipment] : out) transport_.send(std::move(shipment));
}

void Worker::dispatch_experts(Job& job) {
  const std::int32_t b = job.block;
  const std::int32_t last = topo_.num_blocks;
  const LayerKind next_kind = b + 1 == last ? LayerKind::Sampler : LayerKind::Attention;
  std::map<std::int32_t, Shipment> out;  // by rank device
  if (policy_.grouped()) {
    for (std::int32_t d : topo_.rank_device) out[d] = Shipment{device_, d, next_kind, b + 1, job.group, {}};
  }
  for (TokenPacket& p : job.packets) {
    const std::int32_t d = topo_.rank_device[p.rank];
    p.layer = next_kind == LayerKind::Sampler ? LayerId::sampler(last, p.rank) : LayerId::attention(b + 1, p.rank);
    auto [it, inserted] = out.try_emplace(d, Shipment{device_, d, next_kind, b + 1, job.group, {}});
    it->second.packets.push_back(std::move(p));
  }
  for (auto& [d, shipment] : out) transport_.send(std::move(shipment));
}

void Worker::dispatch_sampler(Job& job) {
  for (std::size_t i = 0; i < job.packets.size(); ++i) hooks_.on_sampled(job.packets[i].request, job.next_tokens[i]);
  if (policy_.grouped()) hooks_.on_group_sampled(rank_, job.group);
}

StallReason Worker::current_stall_reason() const {
  if (policy_.grouped() && queued_tokens_ > 0) return StallReason::Barrier;
  if (transport_.in_flight_to(device_) > 0) return StallReason::Transfer;
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

std::vector<std::pair<LayerId, std::int64_t>> Worker::queue_depths() const {
  std::vector<std::pair<LayerId, std::int64_t>> out;
  for (std::int32_t b = 0; b <= topo_.num_blocks; ++b) {
    for (std::int32_t c = 0; c < columns_; ++c) {
      const Queue& q = queues_[static_cast<std::size_t>(b * columns_ + c)];
      if (q.tokens == 0) continue;
      const std::int32_t e = column_expert_.empty() ? -1 : column_expert_[c];
      LayerId id = e >= 0 ? LayerId::expert(b, e)
                          : (b == topo_.num_blocks ? LayerId::sampler(b, rank_) : LayerId::attention(b, rank_));
      out.emplace_back(id, q.tokens);
    }
  }
  return out;
}

}  // namespace sy
