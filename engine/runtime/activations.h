// A handle to rows × width activations in memory that the backend of a device owns (host
// memory, device memory). The runtime moves handles with the token rows they belong to and
// never looks inside: every operation on the values is the owning backend's (ActivationOps).
#pragma once

#include <cstdint>
#include <utility>

namespace sy {

class ActivationOps;

class Activations {
 public:
  // Null: a batch without activations (the sim backend moves none).
  Activations() = default;
  // A null handle's fields are all zero (give_back leaves them so), as this one's are after a
  // reset: only an owned handle has anything to take. The sim moves null handles only, with
  // every batch and token-pool entry.
  Activations(Activations&& other) noexcept {
    if (other.owner_) steal(other);
  }
  Activations& operator=(Activations&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.owner_) steal(other);
    }
    return *this;
  }
  Activations(const Activations&) = delete;
  Activations& operator=(const Activations&) = delete;
  // Gives the storage back to its owner's pool (from whichever thread drops the handle).
  ~Activations() { reset(); }

  bool null() const { return owner_ == nullptr; }
  std::int64_t rows() const { return rows_; }
  std::int64_t width() const { return width_; }
  // The backend whose memory this is; only valid when not null.
  ActivationOps& owner() const { return *owner_; }
  void reset() {
    // Inline so that null handles, all the sim ever has, cost one comparison.
    if (owner_) give_back();
  }
  // Field by field: std::swap's three moves would reset and steal three times (a μ-queue swaps
  // rows with a batch at every arrival and every drain).
  friend void swap(Activations& a, Activations& b) noexcept {
    std::swap(a.owner_, b.owner_);
    std::swap(a.storage_, b.storage_);
    std::swap(a.rows_, b.rows_);
    std::swap(a.width_, b.width_);
    std::swap(a.tag_, b.tag_);
  }

 private:
  friend class ActivationOps;
  void give_back();
  void steal(Activations& other) {
    owner_ = std::exchange(other.owner_, nullptr);
    storage_ = std::exchange(other.storage_, nullptr);
    rows_ = std::exchange(other.rows_, 0);
    width_ = std::exchange(other.width_, 0);
    tag_ = std::exchange(other.tag_, 0);
  }

  ActivationOps* owner_ = nullptr;
  void* storage_ = nullptr;   // only the owner knows what this points at
  std::int64_t rows_ = 0;
  std::int32_t width_ = 0;
  std::int32_t tag_ = 0;  // the owner's bookkeeping of the storage (host: its pool's size class)
};

}  // namespace sy
