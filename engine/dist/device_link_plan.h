// Which ranks of a deployment move activation rows between their device memories directly
// (NCCL on the cuda backend) rather than through host memory, and in what order every rank
// joins those links. Pure functions of every rank's memory identity, tested without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sy::dist {

// Rows from rank `from` to rank `to` go directly when both have a device memory (a non-empty
// identity, e.g. a GPU's UUID) and the memories differ. Ranks sharing one GPU stay host-staged:
// NCCL refuses two ranks of one communicator on one device, and their rows would only cross
// the GPU's own memory. A rank without one (the cpu backend) is host-staged with everyone.
bool device_linked(const std::vector<std::string>& memories, std::int32_t from, std::int32_t to);

// One link per direction: its own two-rank communicator (rank 0 the sender, rank 1 the
// receiver), so that each is driven by one thread at each end (the sender's event loop, the
// receiver's network thread) and the two directions of a pair never queue behind each other.
struct DeviceLinkPair {
  std::int32_t from = 0;
  std::int32_t to = 0;
  bool operator==(const DeviceLinkPair&) const = default;
};

// Every directed pair that device_linked() admits, by ascending (from, to). Rank 0 makes one
// NCCL unique id per entry in this order, and every rank joins its entries in this order: each
// join blocks until both ends have called it, and a single global order means the earliest
// pending pair always has both ends waiting on it, so the joins cannot deadlock.
std::vector<DeviceLinkPair> device_link_pairs(const std::vector<std::string>& memories);

}  // namespace sy::dist
