// Moves shipments between workers. On one host the "wire" is the event loop: a shipment is
// delivered after the latency + bytes / bandwidth of the link it crosses.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "engine/runtime/event_loop.h"
#include "engine/runtime/runtime_observer.h"
#include "engine/runtime/token_packet.h"

namespace sy {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual void send(Shipment&& shipment) = 0;
  // Shipments on their way to `device` (for stall accounting).
  virtual std::int32_t in_flight_to(std::int32_t device) const = 0;
};

// α + β·bytes between distinct devices, zero within a device; an optional seeded jitter
// reorders arrivals (tests use it to shuffle arrival orders deterministically).
struct LinkModel {
  std::int64_t latency_ns = 0;
  double bytes_per_ns = 0;          // 0: infinite bandwidth
  std::int64_t max_jitter_ns = 0;
  std::uint64_t jitter_seed = 0;
};

class LoopTransport final : public Transport {
 public:
  using Receiver = std::function<void(Shipment&&)>;
  LoopTransport(EventLoop& loop, std::int32_t num_devices, std::int64_t bytes_per_row, LinkModel link,
                RuntimeObserver* observer);
  void set_receiver(std::int32_t device, Receiver receiver) { receivers_[device] = std::move(receiver); }
  void set_link(const LinkModel& link) { link_ = link; }

  void send(Shipment&& shipment) override;
  std::int32_t in_flight_to(std::int32_t device) const override { return in_flight_[device]; }

 private:
  EventLoop& loop_;
  std::int64_t bytes_per_row_;
  LinkModel link_;
  RuntimeObserver* observer_;
  std::mt19937_64 jitter_;
  std::vector<Receiver> receivers_;
  std::vector<std::int32_t> in_flight_;
};

}  // namespace sy
