// The transport of a deployment spread over processes: shipments between devices of this
// process take the in-process path (LoopTransport); a shipment to another process's device goes
// as two messages over ZeroMQ/TCP, its header (phase 1) and then its payload (phase 2: metadata
// columns and the activation rows, staged through host memory by the backends at both ends,
// or, between ranks that DeviceLinks joins, the rows over those links right after the message
// that describes them), and is delivered on the receiver's event loop by post_external, in the
// order sent.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/cpu/host_activation_ops.h"
#include "engine/dist/device_links.h"
#include "engine/dist/process_links.h"
#include "engine/runtime/loop_transport.h"

namespace sy::dist {

class ZmqTransport final : public Transport {
 public:
  // device_process: which rank runs each device. Registers its handlers on `links`, which
  // must not have started yet. device_links (may be null, else connected, outliving this):
  // rows to and from the ranks it links go over it.
  ZmqTransport(EventLoop& loop, std::int32_t num_devices, std::int64_t bytes_per_row, LinkModel link,
               RuntimeObserver* observer, std::vector<std::int32_t> device_process, ProcessLinks& links,
               DeviceLinks* device_links = nullptr);
  static TransportFactory factory(ProcessLinks& links, std::vector<std::int32_t> device_process,
                                  std::int64_t bytes_per_row, LinkModel link, DeviceLinks* device_links = nullptr);

  // Where rows arriving for `device` are allocated: by default the process's host arrival
  // pool (the cpu backend's memory); a backend whose devices have memories of their own (cuda)
  // names a pool there, which must outlive every handle of it. Before the links start.
  void set_arrivals(std::int32_t device, ActivationOps* ops);

  void set_receiver(std::int32_t device, Receiver receiver) override;
  void send(Shipment&& shipment) override;
  std::int32_t in_flight_to(std::int32_t device) const override;

  // Shipments this process sent to, and received from, other processes (loop thread): the
  // drain protocol compares the sums over all ranks.
  std::uint64_t sent_remote() const { return sent_remote_; }
  std::uint64_t received_remote() const { return received_remote_; }

 private:
  // Network thread: a payload from rank `from` whose rows take the link was refused.
  void refuse(std::int32_t from, const std::string& why);
  // Whether `device` is one of this process's (any thread: the map is fixed).
  bool runs(std::int32_t device) const {
    return device >= 0 && device < static_cast<std::int32_t>(device_process_.size()) &&
           device_process_[static_cast<std::size_t>(device)] == links_.rank();
  }

  EventLoop& loop_;
  std::int64_t bytes_per_row_;
  RuntimeObserver* observer_;
  std::vector<std::int32_t> device_process_;
  ProcessLinks& links_;
  DeviceLinks* device_links_;
  std::vector<const Activations*> outgoing_;  // send()'s rows over device_links_, reused
  LoopTransport local_;
  std::vector<Receiver> receivers_;
  std::vector<std::int32_t> remote_in_flight_;  // [device]: headers arrived, payloads not yet
  std::uint64_t sent_remote_ = 0;
  std::uint64_t received_remote_ = 0;
  // Where received rows' activations live: the process's one arrival pool (never freed, as
  // handles of it may outlive the transport).
  HostActivationOps* arrivals_;
  std::vector<ActivationOps*> device_arrivals_;  // [device]: set_arrivals', else arrivals_
  std::vector<bool> refused_from_;  // [rank]: network thread; its link is out of step since a refusal
};

}  // namespace sy::dist
