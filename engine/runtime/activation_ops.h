// What a backend does with the activations it owns on behalf of the runtime: allocate from the
// device's pool, gather rows into an outgoing batch (permute by expert, gather by rank),
// append, and scatter rows into the token pool's slot storage. Each call covers a whole batch,
// so a device backend does it with one kernel (cpu: memcpy; cuda: a gather/scatter kernel).
#pragma once

#include <cstdint>
#include <span>

#include "engine/runtime/activations.h"

namespace sy {

// Row `row` of `of`: where a gather reads one row.
struct SourceRow {
  const Activations* of = nullptr;
  std::int64_t row = 0;
};

// Row `row` of `of`: where a scatter writes one row.
struct TargetRow {
  Activations* of = nullptr;
  std::int64_t row = 0;
};

// Every operation runs on the backend that owns the handles involved: the runtime calls it on
// a handle's owner(). The handles one device works on are its own backend's: devices that
// share memory (cpu) pass handles as they are, and a transport between separate memories
// copies the rows into the receiving device's pool first. Operations on one device come from
// its worker's thread; allocate() and giving storage back may also come from the device's
// own thread, so an implementation's pool must take both.
class ActivationOps {
 public:
  virtual ~ActivationOps() = default;

  // rows × width of this device's memory, contents unspecified.
  virtual Activations allocate(std::int64_t rows, std::int64_t width) = 0;
  // dst (whatever it held before is given back) becomes the rows `from` names, in that order;
  // from is not empty and its rows are all this backend's and of one width.
  virtual void gather(std::span<const SourceRow> from, Activations& dst) = 0;
  // Appends src's rows after dst's (same width) and gives src's storage back; a null dst
  // takes src's storage instead.
  virtual void append(Activations& dst, Activations&& src) = 0;
  // Row i of src goes to `to[i]` (to.size() == src.rows()); targets may repeat a handle but
  // never a row.
  virtual void scatter(const Activations& src, std::span<const TargetRow> to) = 0;

  // Between separate memories (a transport to another process): the rows of `a` (this
  // backend's) as rows × width floats written to host memory at `out` (any alignment), done
  // when this returns. Any thread; it may run alongside the device's own calls.
  virtual void copy_to_host(const Activations& a, void* out) = 0;
  // rows × width of this backend's memory holding the host floats at `in` (any alignment),
  // read before this returns. Any thread, like copy_to_host.
  virtual Activations allocate_from_host(const void* in, std::int64_t rows, std::int64_t width) = 0;

 protected:
  // Called by a handle that lets go of its storage, from whichever thread drops it.
  virtual void release(void* storage, std::int32_t tag) noexcept = 0;

  // The handle's internals, for implementations only: the runtime never sees them.
  Activations wrap(void* storage, std::int32_t tag, std::int64_t rows, std::int64_t width) {
    Activations a;
    a.owner_ = this;
    a.storage_ = storage;
    a.tag_ = tag;
    a.rows_ = rows;
    a.width_ = static_cast<std::int32_t>(width);
    return a;
  }
  static void* storage(const Activations& a) { return a.storage_; }
  static std::int32_t tag(const Activations& a) { return a.tag_; }
  static void set_rows(Activations& a, std::int64_t rows) { a.rows_ = rows; }

 private:
  friend class Activations;
};

}  // namespace sy
