#include "engine/cuda/cuda_activation_ops.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "engine/cuda/cuda_must.h"
#include "kernels/cuda/device_sync_lock.h"
#include "kernels/cuda/cuda_kernels.h"

namespace sy {
namespace {

using cuda_backend::must;

std::int32_t size_class(std::int64_t floats) {
  std::int32_t c = 10;  // at least 1024 floats
  while ((std::int64_t{1} << c) < floats) ++c;
  return c;
}

}  // namespace

CudaActivationOps::CudaActivationOps(int gpu) : gpu_(gpu) {
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  must(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  must(cudaStreamCreateWithFlags(&host_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

CudaActivationOps::~CudaActivationOps() {
  cudaSetDevice(gpu_);
  cudaStreamSynchronize(stream_);
  cudaStreamSynchronize(host_stream_);
  for (void* p : all_) cudaFreeAsync(p, stream_);
  cudaStreamSynchronize(stream_);
  kernels::locked_free(pointers_);
  if (staging_) kernels::locked_free_host(staging_);
  cudaStreamDestroy(stream_);
  cudaStreamDestroy(host_stream_);
}

float* CudaActivationOps::data(Activations& a) {
  assert(!a.null() && dynamic_cast<const CudaActivationOps*>(&a.owner()) && "not cuda activations");
  return static_cast<float*>(storage(a));
}

const float* CudaActivationOps::data(const Activations& a) {
  assert(!a.null() && dynamic_cast<const CudaActivationOps*>(&a.owner()) && "not cuda activations");
  return static_cast<const float*>(storage(a));
}

Activations CudaActivationOps::allocate(std::int64_t rows, std::int64_t width) {
  const std::int32_t c = size_class(rows * width);
  void* p = nullptr;
  {
    std::lock_guard lock(mutex_);
    std::vector<void*>& list = free_[c];
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
    }
  }
  if (p == nullptr) {
    must(cudaSetDevice(gpu_), "cudaSetDevice");
    // Stream-ordered, so that it waits for no other work of the device: a rank's network
    // thread allocates arriving rows here while its event loop may be in an NCCL send that
    // waits for another rank's network thread, which may be allocating too; cudaMalloc (which
    // must wait for no NCCL transfer in flight, kernels/cuda/device_sync_lock.h) would close
    // that circle. Synchronised before the storage is handed out: any stream may use it next.
    must(cudaMallocAsync(&p, (std::size_t{1} << c) * sizeof(float), stream_), "cudaMallocAsync (activations)");
    must(cudaStreamSynchronize(stream_), "cudaMallocAsync (activations)");
    std::lock_guard lock(mutex_);
    all_.push_back(p);
  }
  return wrap(p, c, rows, width);
}

void CudaActivationOps::release(void* storage, std::int32_t tag) noexcept {
  std::lock_guard lock(mutex_);
  free_[tag].push_back(storage);
}

void CudaActivationOps::copy(const std::vector<const float*>& src, const std::vector<float*>& dst, std::int64_t width) {
  const auto n = static_cast<std::int64_t>(src.size());
  if (n == 0) return;
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  if (2 * n > pointer_capacity_) {
    must(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    must(kernels::locked_free(pointers_), "cudaFree");
    pointer_capacity_ = 2 * n * 2;
    must(kernels::locked_malloc(&pointers_, static_cast<std::size_t>(pointer_capacity_) * sizeof(void*)),
         "cudaMalloc");
  }
  auto* table = static_cast<void**>(pointers_);
  // Pageable sources are staged before cudaMemcpyAsync returns, so the vectors may go.
  must(cudaMemcpyAsync(table, src.data(), static_cast<std::size_t>(n) * sizeof(void*), cudaMemcpyHostToDevice, stream_),
       "cudaMemcpyAsync (row pointers)");
  must(cudaMemcpyAsync(table + n, dst.data(), static_cast<std::size_t>(n) * sizeof(void*), cudaMemcpyHostToDevice,
                       stream_),
       "cudaMemcpyAsync (row pointers)");
  must(kernels::copy_rows_cuda(reinterpret_cast<const float* const*>(table), reinterpret_cast<float* const*>(table + n),
                               n, width, stream_));
  must(cudaStreamSynchronize(stream_), "activation row copy");
}

void CudaActivationOps::gather(std::span<const SourceRow> from, Activations& dst) {
  assert(!from.empty());
  const std::int64_t width = from.front().of->width();
  const auto n = static_cast<std::int64_t>(from.size());
  if (dst.null() || &dst.owner() != this || dst.width() != width ||
      n * width > (std::int64_t{1} << tag(dst))) {
    dst = allocate(n, width);
  } else {
    set_rows(dst, n);
  }
  float* out = data(dst);
  std::vector<const float*> src(static_cast<std::size_t>(n));
  std::vector<float*> to(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const SourceRow& r = from[static_cast<std::size_t>(i)];
    assert(r.of->width() == width && r.row < r.of->rows());
    src[static_cast<std::size_t>(i)] = data(*r.of) + r.row * width;
    to[static_cast<std::size_t>(i)] = out + i * width;
  }
  copy(src, to, width);
}

void CudaActivationOps::append(Activations& dst, Activations&& src) {
  if (src.null()) return;
  if (dst.null()) {
    dst = std::move(src);
    return;
  }
  assert(dst.width() == src.width());
  const std::int64_t width = dst.width();
  const std::int64_t rows = dst.rows() + src.rows();
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  if (rows * width > (std::int64_t{1} << tag(dst)) || &dst.owner() != this) {
    Activations grown = allocate(rows, width);
    must(cudaMemcpyAsync(data(grown), data(dst), static_cast<std::size_t>(dst.rows() * width) * sizeof(float),
                         cudaMemcpyDeviceToDevice, stream_),
         "cudaMemcpyAsync (append)");
    set_rows(grown, dst.rows());
    must(cudaStreamSynchronize(stream_), "append");
    dst = std::move(grown);
  }
  must(cudaMemcpyAsync(data(dst) + dst.rows() * width, data(src), static_cast<std::size_t>(src.rows() * width) * sizeof(float),
                       cudaMemcpyDeviceToDevice, stream_),
       "cudaMemcpyAsync (append)");
  must(cudaStreamSynchronize(stream_), "append");
  set_rows(dst, rows);
  src.reset();
}

void CudaActivationOps::scatter(const Activations& src, std::span<const TargetRow> to) {
  assert(static_cast<std::int64_t>(to.size()) == src.rows());
  const std::int64_t width = src.width();
  const float* in = data(src);
  std::vector<const float*> from(to.size());
  std::vector<float*> dst(to.size());
  for (std::size_t i = 0; i < to.size(); ++i) {
    assert(to[i].of->width() == width && to[i].row < to[i].of->rows());
    from[i] = in + static_cast<std::int64_t>(i) * width;
    dst[i] = data(*to[i].of) + to[i].row * width;
  }
  copy(from, dst, width);
}

void* CudaActivationOps::staging(std::size_t bytes) {
  if (bytes > staging_bytes_) {
    // Nothing is in flight from the old buffer: every user synchronizes before it returns.
    if (staging_) must(kernels::locked_free_host(staging_), "cudaFreeHost (staging)");
    staging_ = nullptr;
    staging_bytes_ = std::max<std::size_t>(bytes, 2 * staging_bytes_);
    must(kernels::locked_malloc_host(&staging_, staging_bytes_), "cudaMallocHost (activation staging)");
  }
  return staging_;
}

void CudaActivationOps::copy_to_host(const Activations& a, void* out) {
  const auto bytes = static_cast<std::size_t>(a.rows() * a.width()) * sizeof(float);
  if (bytes == 0) return;
  std::lock_guard lock(host_mutex_);
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  void* host = staging(bytes);
  // The rows' producer has finished (the runtime hands over rows only after their execution's
  // completion, and gather/scatter synchronize), so this stream need not wait for another.
  must(cudaMemcpyAsync(host, data(a), bytes, cudaMemcpyDeviceToHost, host_stream_), "cudaMemcpyAsync (rows to host)");
  must(cudaStreamSynchronize(host_stream_), "rows to host");
  std::memcpy(out, host, bytes);
}

Activations CudaActivationOps::allocate_from_host(const void* in, std::int64_t rows, std::int64_t width) {
  Activations a = allocate(rows, width);
  const auto bytes = static_cast<std::size_t>(rows * width) * sizeof(float);
  if (bytes == 0) return a;
  std::lock_guard lock(host_mutex_);
  must(cudaSetDevice(gpu_), "cudaSetDevice");
  // Straight from the (pageable) message: the driver stages it without a device-wide wait,
  // whereas growing our pinned staging here, on a rank's network thread, would have to wait
  // for the NCCL transfers of its event loop, which may wait for this very thread elsewhere
  // (see allocate()).
  must(cudaMemcpyAsync(data(a), in, bytes, cudaMemcpyHostToDevice, host_stream_), "cudaMemcpyAsync (rows from host)");
  // Done before the handle is handed on: its next user may be any stream of this GPU.
  must(cudaStreamSynchronize(host_stream_), "rows from host");
  return a;
}

}  // namespace sy
