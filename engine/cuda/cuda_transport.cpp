#include "engine/cuda/cuda_transport.h"

#include <utility>

#include "engine/cuda/cuda_activation_ops.h"
#include "engine/cuda/cuda_deployment.h"

namespace sy {

CudaTransport::CudaTransport(std::unique_ptr<Transport> inner, std::vector<int> device_gpu,
                             std::shared_ptr<NcclLinks> links)
    : inner_(std::move(inner)), device_gpu_(std::move(device_gpu)), links_(std::move(links)) {}

void CudaTransport::send(Shipment&& shipment) {
  const int from = device_gpu_[static_cast<std::size_t>(shipment.src)];
  const int to = device_gpu_[static_cast<std::size_t>(shipment.dst)];
  if (from != to) {
    // The rows land in the receiving GPU's arrival pool, which every device there gathers from
    // as from its own; the sender's storage goes back to its pool once the move has landed.
    ActivationOps& arrivals = cuda_arrival_pool(to);
    std::vector<Activations> landed;
    moves_.clear();
    for (TokenBatch& b : shipment.batches) {
      if (b.hidden.null() || b.hidden.rows() == 0) {
        landed.emplace_back();
        continue;
      }
      landed.push_back(arrivals.allocate(b.hidden.rows(), b.hidden.width()));
      moves_.push_back({CudaActivationOps::data(std::as_const(b.hidden)), from, CudaActivationOps::data(landed.back()),
                        to, static_cast<std::size_t>(b.hidden.rows() * b.hidden.width())});
    }
    links_->move(moves_);
    for (std::size_t i = 0; i < shipment.batches.size(); ++i)
      if (!landed[i].null()) shipment.batches[i].hidden = std::move(landed[i]);
  }
  inner_->send(std::move(shipment));
}

}  // namespace sy
