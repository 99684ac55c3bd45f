#include "engine/runtime/cluster.h"

#include <cassert>
#include <memory>

namespace sy {

Cluster::Cluster(Topology topology, EventLoop& loop, const ExecutorFactory& make_executor,
                 const TransportFactory& make_transport, KvShape kv, RuntimeObserver* observer, Worker::Hooks hooks,
                 std::int32_t process)
    : topology_(std::move(topology)), loop_(loop), process_(process), hooks_(hooks) {
  transport_ = make_transport(loop_, topology_.num_devices, observer);
  for (std::int32_t r = 0; r < topology_.num_ranks(); ++r)
    kv_.push_back(std::make_unique<KvBlockManager>(kv.pages_per_rank, kv.page_size));
  for (std::int32_t d = 0; d < topology_.num_devices; ++d) {
    const std::int32_t rank = topology_.device_rank[d];
    if (topology_.process_of(d) != process_) {  // another process runs it
      executors_.push_back(nullptr);
      workers_.push_back(nullptr);
      continue;
    }
    executors_.push_back(make_executor(d, rank >= 0, loop_));
    workers_.push_back(std::make_unique<Worker>(d, topology_, loop_, *executors_[d], *transport_, recycler_, observer,
                                                hooks, rank >= 0 ? kv_[static_cast<std::size_t>(rank)].get() : nullptr));
    Worker* w = workers_.back().get();
    transport_->set_receiver(d, {[w](const ShipmentHeader& h) { w->announce(h); },
                                 [w](Shipment&& s) { w->receive(std::move(s)); }});
  }
}

bool Cluster::admit(std::int32_t rank, std::int64_t request, std::int64_t positions, const SamplingSpec& sampling) {
  KvBlockManager& manager = kv(rank);
  if (!manager.admit(request, positions, sampling)) return false;
  if (remote_rank(rank)) {
    assert(peers_ && "an attention rank in another process without peers");
    peers_->open_sequence(topology_.process_of(topology_.rank_device[static_cast<std::size_t>(rank)]), rank,
                          manager.context(request));
  }
  return true;
}

void Cluster::release(std::int32_t rank, std::int64_t request) {
  KvBlockManager& manager = kv(rank);
  if (!manager.holds(request)) return;
  manager.release(request);
  if (remote_rank(rank) && peers_)
    peers_->close_sequence(topology_.process_of(topology_.rank_device[static_cast<std::size_t>(rank)]), rank, request);
}

void Cluster::set_hooks(Worker::Hooks hooks) {
  hooks_ = std::move(hooks);
  for (auto& w : workers_)
    if (w) w->set_hooks(hooks_);
}

void Cluster::inject(std::int32_t rank, std::int32_t group, TokenBatch rows) {
  const std::int32_t d = topology_.rank_device[rank];
  rows.layer = LayerId::attention(0, rank);
  rows.group = group;
  Shipment s{d, d, LayerKind::Attention, 0, group, {}};
  if (!rows.empty()) s.batches.push_back(std::move(rows));
  transport_->send(std::move(s));
}

bool Cluster::quiescent() const {
  for (std::int32_t d = 0; d < topology_.num_devices; ++d) {
    if (!workers_[d]) continue;
    if (!workers_[d]->quiescent() || transport_->in_flight_to(d) > 0) return false;
  }
  return true;
}

void Cluster::set_policy(const RuntimePolicy& policy) {
  assert(quiescent());
  for (auto& w : workers_)
    if (w) w->set_policy(policy);
}

void Cluster::apply_at_safe_point(const RuntimePolicy& policy, std::optional<Placement> placement,
                                  std::function<void()> released) {
  if (!peers_) {
    if (placement) set_placement(std::move(*placement));
    set_policy(policy);
    released();
    return;
  }
  const bool moves = placement.has_value();
  // The peers copy `policy` and the placement before they run apply_here.
  auto shared = std::make_shared<std::optional<Placement>>(std::move(placement));
  peers_->apply(
      [this, policy, shared] {
        if (*shared) set_placement(std::move(**shared));
        set_policy(policy);
      },
      policy, moves ? &**shared : nullptr, std::move(released));
}

void Cluster::set_placement(Placement placement) {
  assert(quiescent());
  assert(placement.check_shape(topology_.num_experts, topology_.sparse).ok());
  assert(placement.validate(topology_.num_devices).ok());
  topology_.placement = std::move(placement);
  topology_.finalize();
  for (auto& w : workers_)
    if (w) w->reload_placement();
}

void Cluster::flush_stalls() {
  for (auto& w : workers_)
    if (w) w->flush_stall();
}

}  // namespace sy
