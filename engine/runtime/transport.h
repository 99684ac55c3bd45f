// Moves shipments between workers in two phases (AMoE §3.5): phase 1 carries a shipment's
// metadata, so the receiver knows what is in flight to it and from whom; phase 2 the payload
// (rows and activations). Implementations: in-process (LoopTransport, over the event loop),
// and later NCCL between GPUs and ZeroMQ/TCP between processes; the worker sees only this.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "base/status.h"
#include "engine/runtime/event_loop.h"
#include "engine/runtime/runtime_observer.h"
#include "engine/runtime/token_batch.h"

namespace sy {

// Phase 1: what a shipment holds, sent ahead of its payload.
struct ShipmentHeader {
  std::int32_t src = 0;
  std::int32_t dst = 0;
  LayerKind kind = LayerKind::Attention;
  std::int32_t block = 0;
  std::int32_t group = -1;
  std::int64_t rows = 0;
  std::int64_t bytes = 0;
};

class Transport {
 public:
  struct Receiver {
    // Phase 1: in flight now; in_flight_to(dst) counts the shipment by the time this runs.
    std::function<void(const ShipmentHeader&)> on_header;
    std::function<void(Shipment&&)> on_payload;  // phase 2: arrived
    // Transports from other processes only: whether the device can take a peer's header or
    // shipment (Worker::check_remote); what fails is dropped with the reason. Optional.
    std::function<Status(const ShipmentHeader&)> check_header = {};
    std::function<Status(const Shipment&)> check_payload = {};
    // Optional, in-process transports only: the same two phases as plain calls into `target`,
    // which they prefer to the functions above (a std::function's call and the lambda's are two
    // indirect steps per shipment where the simulator makes half a million shipments a cluster
    // second). Set by of(); what they call must be what on_header and on_payload call.
    void* target = nullptr;
    void (*header_fn)(void* target, const ShipmentHeader&) = nullptr;
    void (*payload_fn)(void* target, Shipment&&) = nullptr;

    // A receiver whose phases are t->announce(header) and t->receive(shipment), and whose
    // checks are t->check_remote of each.
    template <class T>
    static Receiver of(T* t) {
      Receiver r{[t](const ShipmentHeader& h) { t->announce(h); }, [t](Shipment&& s) { t->receive(std::move(s)); },
                 [t](const ShipmentHeader& h) { return t->check_remote(h); },
                 [t](const Shipment& s) { return t->check_remote(s); }};
      r.target = t;
      r.header_fn = [](void* o, const ShipmentHeader& h) { static_cast<T*>(o)->announce(h); };
      r.payload_fn = [](void* o, Shipment&& s) { static_cast<T*>(o)->receive(std::move(s)); };
      return r;
    }
  };
  virtual ~Transport() = default;
  // Who receives on `device` (this process's devices only). Before the first send.
  virtual void set_receiver(std::int32_t device, Receiver receiver) = 0;
  // Sends both phases; the payload is delivered after the header, on the receiver's loop.
  virtual void send(Shipment&& shipment) = 0;
  // Shipments whose header has reached `device` and whose payload has not (stall accounting).
  virtual std::int32_t in_flight_to(std::int32_t device) const = 0;
};

// Makes the transport of a deployment for `num_devices` devices on `loop`.
using TransportFactory =
    std::function<std::unique_ptr<Transport>(EventLoop& loop, std::int32_t num_devices, RuntimeObserver* observer)>;

}  // namespace sy
