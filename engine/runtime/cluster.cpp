#include "engine/runtime/cluster.h"

#include <cassert>
#include <memory>
#include <utility>

namespace sy {

Cluster::Cluster(Topology topology, EventLoop& loop, const ExecutorFactory& make_executor,
                 const TransportFactory& make_transport, KvShape kv, RuntimeObserver* observer, Worker::Hooks hooks,
                 std::int32_t process)
    : topology_(std::move(topology)), loop_(loop), process_(process), hooks_(hooks), observer_(observer) {
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
    transport_->set_receiver(d, Transport::Receiver::of(w));
  }
  // Every device starts with the weights of the experts the topology places on it, loaded from
  // the host's copy; devices of other processes are accounted here and load in their process.
  std::int64_t expert_bytes = 0;
  std::vector<std::int64_t> fixed(static_cast<std::size_t>(topology_.num_devices), 0);
  for (std::int32_t d = 0; d < topology_.num_devices; ++d) {
    if (!executors_[d]) continue;
    expert_bytes = executors_[d]->expert_bytes();
    fixed[static_cast<std::size_t>(d)] = executors_[d]->kv_storage_bytes();
  }
  residency_ = ExpertResidency(topology_.num_devices, expert_bytes, topology_.device_memory_bytes, std::move(fixed));
  const auto experts = topology_.placement.experts_by_device(topology_.num_devices);
  for (std::int32_t d = 0; d < topology_.num_devices; ++d) {
    for (const BlockExpert& be : experts[static_cast<std::size_t>(d)]) {
      if (executors_[d]) executors_[d]->load_expert(be.block, be.expert);
      residency_.load(be.block, be.expert, d);
    }
  }
}

Cluster::~Cluster() {
  // Finished, not destroyed: the workers' activations go back to the executors' pools.
  for (auto& e : executors_)
    if (e) e->finish();
}

bool Cluster::admit(std::int32_t rank, std::int64_t request, std::int64_t positions, const SamplingSpec& sampling,
                    std::span<const std::int32_t> prompt, std::span<const kernels::TokenBias> logit_bias,
                    const std::shared_ptr<const structured::GuideSpec>& guide) {
  KvBlockManager& manager = kv(rank);
  // A rank in another process samples there, so its guide lives there; this mirror keeps none.
  const bool remote = remote_rank(rank);
  if (!manager.admit(request, positions, sampling, prompt, logit_bias, remote ? nullptr : guide)) return false;
  if (remote) {
    assert(peers_ && "an attention rank in another process without peers");
    peers_->open_sequence(topology_.process_of(topology_.rank_device[static_cast<std::size_t>(rank)]), rank,
                          manager.context(request), guide.get());
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
  // Copies still running (a policy switch re-applying a placement meanwhile) are for the staged
  // placement: keep what it needs. Otherwise nothing is staged any more.
  if (!copying()) staged_.reset();
  const auto experts = topology_.placement.experts_by_device(topology_.num_devices);
  for (std::int32_t d = 0; d < topology_.num_devices; ++d) {
    Executor* ex = executors_[d].get();
    for (const BlockExpert& be : residency_.surplus(d, topology_.placement, staged_ ? &*staged_ : nullptr)) {
      if (ex) ex->drop_expert(be.block, be.expert);
      residency_.drop(be.block, be.expert, d);
    }
    for (const BlockExpert& be : experts[static_cast<std::size_t>(d)]) {
      if (residency_.resident(be.block, be.expert, d)) continue;
      // No copy brought it: a device of another process (or of a process that did not stage).
      assert(!residency_.arriving(be.block, be.expert, d) && "switched before its copy arrived");
      if (ex) ex->load_expert(be.block, be.expert);
      residency_.load(be.block, be.expert, d);
    }
  }
  for (auto& w : workers_)
    if (w) w->reload_placement();
}

StatusOr<std::vector<WeightCopy>> Cluster::stage_weights(const Placement& placement, std::function<void()> ready) {
  auto planned = residency_.plan(placement, topology_.device_names);
  if (!planned.ok()) return planned.status();
  std::vector<WeightCopy> started;
  for (WeightCopy c : *planned) {
    // A device of another process loads it there at the switch; one whose backend shares the
    // weights between devices has it already.
    if (!local(c.target) || !executors_[c.target]->owns_expert_weights()) continue;
    if (c.source >= 0 && !local(c.source)) c.source = -1;  // another process's memory: from the host
    c.started_ns = loop_.now();
    residency_.begin(c);
    CopyJob& job = copies_.emplace_back(CopyJob{this, c});
    executors_[c.target]->fetch_expert(c.block, c.expert, c.source >= 0 ? executors_[c.source].get() : nullptr,
                                       Completion::of<CopyJob, &CopyJob::finish>(&job));
    started.push_back(c);
  }
  if (copying()) {
    staged_ = placement;
    ready_ = std::move(ready);
  }
  return started;
}

std::vector<WeightCopy> Cluster::copies_in_flight() const {
  std::vector<WeightCopy> out;
  for (const CopyJob& j : copies_) out.push_back(j.copy);
  return out;
}

void Cluster::copy_arrived(CopyJob& job, ExecutionTiming timing) {
  const WeightCopy c = job.copy;
  residency_.arrived(c);
  if (observer_)
    observer_->on_weight_fetch(c.target, c.source, c.block, c.expert, c.bytes, timing.start_ns, timing.end_ns);
  copies_.remove_if([&](const CopyJob& j) { return &j == &job; });
  if (copies_.empty() && ready_) std::exchange(ready_, nullptr)();
}

void Cluster::set_weights_wait(bool waiting) {
  for (auto& w : workers_)
    if (w) w->set_weights_wait(waiting);
}

void Cluster::flush_stalls() {
  for (auto& w : workers_)
    if (w) w->flush_stall();
}

}  // namespace sy
