// The transport of a cuda deployment whose process runs workers on several GPUs: a shipment
// between devices of one GPU passes its handles as they are (the in-process transport it
// wraps); one between two GPUs first moves each batch's rows into the receiving GPU's arrival
// pool over NCCL (NcclLinks), then goes the same way. Phase 1 and delivery are the wrapped
// transport's, unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/cuda/nccl_links.h"
#include "engine/runtime/transport.h"

namespace sy {

class CudaTransport final : public Transport {
 public:
  // device_gpu: the GPU of every device (all of this process's).
  CudaTransport(std::unique_ptr<Transport> inner, std::vector<int> device_gpu, std::shared_ptr<NcclLinks> links);

  void set_receiver(std::int32_t device, Receiver receiver) override { inner_->set_receiver(device, std::move(receiver)); }
  void send(Shipment&& shipment) override;
  std::int32_t in_flight_to(std::int32_t device) const override { return inner_->in_flight_to(device); }

 private:
  std::unique_ptr<Transport> inner_;
  std::vector<int> device_gpu_;
  std::shared_ptr<NcclLinks> links_;
  std::vector<NcclLinks::Move> moves_;  // reused between sends
};

}  // namespace sy
