#include "engine/cpu/host_activation_ops.h"

#include <cassert>
#include <cstring>

namespace sy {
namespace {

void copy_rows(float* dst, const float* src, std::int64_t rows, std::int64_t width) {
  std::memcpy(dst, src, static_cast<std::size_t>(rows * width) * sizeof(float));
}

}  // namespace

float* HostActivationOps::data(Activations& a) {
  assert(!a.null() && dynamic_cast<const HostActivationOps*>(&a.owner()) && "not host activations");
  return static_cast<float*>(storage(a));
}

const float* HostActivationOps::data(const Activations& a) {
  assert(!a.null() && dynamic_cast<const HostActivationOps*>(&a.owner()) && "not host activations");
  return static_cast<const float*>(storage(a));
}

bool HostActivationOps::fits(const Activations& dst, std::int64_t rows) {
  return rows * dst.width() <= HostBufferPool::capacity(tag(dst));
}

Activations HostActivationOps::allocate(std::int64_t rows, std::int64_t width) {
  const HostBufferPool::Buffer b = pool_.take(rows * width);
  return wrap(b.data, b.size_class, rows, width);
}

void HostActivationOps::release(void* storage, std::int32_t tag) noexcept {
  pool_.give({static_cast<float*>(storage), tag});
}

void HostActivationOps::gather(std::span<const SourceRow> from, Activations& dst) {
  assert(!from.empty());
  const std::int64_t width = from.front().of->width();
  const auto n = static_cast<std::int64_t>(from.size());
  // A batch of the same width that is big enough is refilled where it is.
  if (dst.null() || &dst.owner() != this || dst.width() != width || !fits(dst, n)) {
    dst = allocate(n, width);
  } else {
    set_rows(dst, n);
  }
  float* out = data(dst);
  // Rows that follow each other in one source (a request's prefill, an expert's output bound
  // for one rank) go in one copy.
  for (std::int64_t i = 0; i < n;) {
    const SourceRow& first = from[static_cast<std::size_t>(i)];
    assert(first.of->width() == width && first.row < first.of->rows());
    std::int64_t run = 1;
    while (i + run < n && from[static_cast<std::size_t>(i + run)].of == first.of &&
           from[static_cast<std::size_t>(i + run)].row == first.row + run)
      ++run;
    copy_rows(out + i * width, data(*first.of) + first.row * width, run, width);
    i += run;
  }
}

void HostActivationOps::append(Activations& dst, Activations&& src) {
  if (src.null()) return;
  if (dst.null()) {
    dst = std::move(src);
    return;
  }
  assert(dst.width() == src.width());
  const std::int64_t width = dst.width();
  const std::int64_t rows = dst.rows() + src.rows();
  if (!fits(dst, rows)) {
    // The pool's classes double, so a batch that keeps growing is copied O(log rows) times.
    Activations grown = allocate(rows, width);
    copy_rows(data(grown), data(dst), dst.rows(), width);
    set_rows(grown, dst.rows());
    dst = std::move(grown);
  }
  copy_rows(data(dst) + dst.rows() * width, data(src), src.rows(), width);
  set_rows(dst, rows);
  src.reset();
}

void HostActivationOps::scatter(const Activations& src, std::span<const TargetRow> to) {
  assert(static_cast<std::int64_t>(to.size()) == src.rows());
  const std::int64_t width = src.width();
  const float* in = data(src);
  for (std::size_t i = 0; i < to.size(); ++i) {
    assert(to[i].of->width() == width && to[i].row < to[i].of->rows());
    copy_rows(data(*to[i].of) + to[i].row * width, in + static_cast<std::int64_t>(i) * width, 1, width);
  }
}

// Host to host: the rows are already where a transport reads them, one memcpy each way.
void HostActivationOps::copy_to_host(const Activations& a, void* out) {
  std::memcpy(out, data(a), static_cast<std::size_t>(a.rows() * a.width()) * sizeof(float));
}

Activations HostActivationOps::allocate_from_host(const void* in, std::int64_t rows, std::int64_t width) {
  Activations a = allocate(rows, width);
  std::memcpy(data(a), in, static_cast<std::size_t>(rows * width) * sizeof(float));
  return a;
}

}  // namespace sy
