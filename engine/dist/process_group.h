// The control protocol of the ranks of one deployment, on top of their links: rank 0 (which
// runs the coordinator) makes a policy or placement change one atomic step of every process by
// draining (every rank reports that it is at its safe point and how many shipments it sent to
// and received from other processes; two identical rounds with equal sums mean nothing is in
// flight), applying (every rank applies and acknowledges) and releasing; and ends the run.
// The other ranks answer on their event loops and serve until rank 0 shuts them down.

#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "engine/dist/attention_messages.h"
#include "engine/dist/process_links.h"
#include "engine/dist/zmq_transport.h"
#include "engine/runtime/cluster.h"
#include "engine/runtime/cluster_peers.h"
#include "engine/structured/guide_specs.h"

namespace sy::dist {

// Whether rank 0 may hand a Sampled from another process to its coordinator, which indexes its
// records by the request: it must name a request an attention rank of another process holds,
// and a token of the model (or Worker::kNoToken).
Status check_sampled(const Cluster& cluster, const Sampled& m);

class ProcessGroup final : public ClusterPeers {
 public:
  // Registers its handlers on `links` (before links.start()). Holds the loop open (outside
  // work) until the run ends: on rank 0 until shutdown(), elsewhere until rank 0's Shutdown.
  ProcessGroup(ProcessLinks& links, EventLoop& loop, Cluster& cluster, ZmqTransport& transport);
  ~ProcessGroup() override;

  // ClusterPeers, rank 0 only.
  void apply(std::function<void()> apply_here, const RuntimePolicy& policy, const Placement* placement,
             std::function<void()> released) override;
  void open_sequence(std::int32_t process, std::int32_t rank, const SequenceContext& context,
                     const structured::GuideSpec* guide) override;
  void close_sequence(std::int32_t process, std::int32_t rank, std::int64_t request) override;
  // Rank 0, on its loop: tells every rank the run is over.
  void shutdown();
  // Lets this rank's loop end without telling anyone (rank 0 is gone).
  void stop();
  // Whether the run goes on (this rank's loop is held open).
  const bool& open() const { return holding_loop_; }
  // Drain rounds rank 0 ran for the changes so far (a benchmark and test figure).
  std::int64_t drain_rounds() const { return drain_rounds_; }

 private:
  struct RankState {
    bool quiescent = false;
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    bool operator==(const RankState&) const = default;
  };
  struct Change {
    std::function<void()> apply_here;
    RuntimePolicy policy;
    std::optional<Placement> placement;
    std::function<void()> released;
  };

  void broadcast(const std::string& message);
  // A message of the run's own (not a shipment) that the drain must see arrive: sequences to
  // the attention devices of other ranks, sampled tokens back to rank 0.
  void send_counted(std::int32_t rank, const std::string& message);
  // What this process contributes to a drain round.
  RankState own_state() const;
  // Ranks other than 0: the handlers of rank 0's sequences, and hooks that send sampled tokens.
  void serve_attention();
  void start_drain_round();
  void on_drained(std::uint64_t epoch, std::int32_t rank, RankState state);
  void on_applied(std::uint64_t epoch);
  void end_outside_work();

  // Other ranks:
  void answer_drain(std::uint64_t epoch);
  void apply_remote(std::uint64_t epoch, const RuntimePolicy& policy, const std::optional<Placement>& placement);

  ProcessLinks& links_;
  EventLoop& loop_;
  Cluster& cluster_;
  ZmqTransport& transport_;
  bool holding_loop_ = false;

  std::optional<Change> change_;
  std::uint64_t epoch_ = 0;
  std::vector<std::optional<RankState>> round_;      // this round's answers, [rank]
  std::vector<RankState> previous_;                  // the last complete round's, when it was clean
  bool previous_clean_ = false;
  std::int32_t acks_ = 0;
  std::int64_t drain_rounds_ = 0;
  // Rank 0: the guided vocabulary each process was sent last ([process]; null: none yet).
  std::vector<const structured::TokenVocabulary*> vocabulary_sent_;
  // Other ranks: the vocabulary rank 0 sent, which guided requests opened here are masked by,
  // with the specs of the grammars they asked for (requests of one schema share its masks).
  std::unique_ptr<structured::GuideSpecs> guide_specs_;
  std::uint64_t sent_ = 0;      // send_counted messages, loop thread
  std::uint64_t received_ = 0;  // theirs that arrived, counted on the loop as they are handled
};

}  // namespace sy::dist
