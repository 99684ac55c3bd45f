// The control protocol of the ranks of one deployment, on top of their links: rank 0 (which
// runs the coordinator) makes a policy or placement change one atomic step of every process by
// draining (every rank reports that it is at its safe point and how many shipments it sent to
// and received from other processes; two identical rounds with equal sums mean nothing is in
// flight), applying (every rank applies and acknowledges) and releasing; and ends the run.
// The other ranks answer on their event loops and serve until rank 0 shuts them down.
// Heartbeats: rank 0 and every other rank hear from each other every 100 ms; silence past the
// heartbeat timeout is a dead rank (SIGKILL, a lost node), reported once through on_lost.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <optional>
#include <vector>

#include "engine/dist/process_links.h"
#include "engine/dist/zmq_transport.h"
#include "engine/runtime/cluster.h"
#include "engine/runtime/cluster_peers.h"

namespace sy::dist {

class ProcessGroup final : public ClusterPeers {
 public:
  // Registers its handlers on `links` (before links.start()). Holds the loop open (outside
  // work) until the run ends: on rank 0 until shutdown(), elsewhere until rank 0's Shutdown.
  // on_lost(rank, why) runs on the loop when a watched rank falls silent (rank 0 watches every
  // rank, the others watch rank 0); `heartbeat_timeout_ns` is the silence that counts.
  using LostRank = std::function<void(std::int32_t rank, const std::string& why)>;
  ProcessGroup(ProcessLinks& links, EventLoop& loop, Cluster& cluster, ZmqTransport& transport,
               std::int64_t heartbeat_timeout_ns, LostRank on_lost);
  ~ProcessGroup() override;

  // ClusterPeers, rank 0 only.
  void apply(std::function<void()> apply_here, const RuntimePolicy& policy, const Placement* placement,
             std::function<void()> released) override;
  // Rank 0, on its loop: tells every rank the run is over.
  void shutdown();
  // Lets this rank's loop end without telling anyone (rank 0 is gone).
  void stop();
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
  void start_drain_round();
  void on_drained(std::uint64_t epoch, std::int32_t rank, RankState state);
  void on_applied(std::uint64_t epoch);
  void end_outside_work();
  // Sends this rank's heartbeat and checks the watched ranks'; re-arms itself until the end.
  void heartbeat();
  // Other ranks:
  void answer_drain(std::uint64_t epoch);
  void apply_remote(std::uint64_t epoch, const RuntimePolicy& policy, const std::optional<Placement>& placement);

  ProcessLinks& links_;
  EventLoop& loop_;
  Cluster& cluster_;
  ZmqTransport& transport_;
  bool holding_loop_ = false;
  std::int64_t heartbeat_timeout_ns_;
  LostRank on_lost_;
  bool lost_ = false;
  std::unique_ptr<std::atomic<std::int64_t>[]> last_heard_;  // [rank]: loop time of its last heartbeat
  std::optional<Change> change_;
  std::uint64_t epoch_ = 0;
  std::vector<std::optional<RankState>> round_;      // this round's answers, [rank]
  std::vector<RankState> previous_;                  // the last complete round's, when it was clean
  bool previous_clean_ = false;
  std::int32_t acks_ = 0;
  std::int64_t drain_rounds_ = 0;
};

}  // namespace sy::dist
