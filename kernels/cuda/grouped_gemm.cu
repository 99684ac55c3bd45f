// grouped_linear_cuda: many y = x·Wᵀ problems of one shape family in one cuBLAS grouped GEMM,
// and convert_from_f32_cuda, which produces the low-precision activations it consumes.
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_sync_lock.h"
#include "kernels/cuda/grouped_small_m.h"
#include "kernels/cuda/grouped_tensor_core.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr int kThreads = 256;

// bf16: the bit-level rounding of f32_to_bf16 (kernels/cpu/dtype.h). f16: the hardware's
// round-to-nearest-even conversion, as f32_to_f16 (NaN payloads may differ; no model has them).
__global__ void convert_kernel(const float* __restrict__ src, void* __restrict__ dst, DType type, long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float f = src[i];
    if (type == DType::BF16) {
      unsigned bits = __float_as_uint(f);
      if ((bits & 0x7fffffffu) > 0x7f800000u) {
        bits = (bits >> 16) | 0x40u;
      } else {
        bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
      }
      static_cast<std::uint16_t*>(dst)[i] = static_cast<std::uint16_t>(bits);
    } else if (type == DType::F16) {
      static_cast<std::uint16_t*>(dst)[i] = __half_as_ushort(__float2half_rn(f));
    } else {
      static_cast<float*>(dst)[i] = f;
    }
  }
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

}  // namespace

Status convert_from_f32_cuda(const float* src, void* dst, DType type, std::int64_t n, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(n >= 0, "convert_from_f32_cuda: negative size"));
  if (n == 0) return Status::Ok();
  convert_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(src, dst, type, n);
  return detail::check_launch("convert_from_f32_cuda");
}

GroupedGemmWorkspace::~GroupedGemmWorkspace() {
  locked_free(pointers_);
  locked_free(table_);
}

Status GroupedGemmWorkspace::reserve_table(std::size_t bytes) {
  if (bytes <= table_bytes_) return Status::Ok();
  const std::size_t grown = std::max(bytes, table_bytes_ * 2);
  // cudaFree waits for the device, so no queued kernel still reads the old table.
  SY_RETURN_IF_ERROR(detail::check_cuda(locked_free(table_), "GroupedGemmWorkspace: cudaFree"));
  table_ = nullptr;
  table_bytes_ = 0;
  SY_RETURN_IF_ERROR(detail::check_cuda(locked_malloc(&table_, grown), "GroupedGemmWorkspace: cudaMalloc"));
  table_bytes_ = grown;
  return Status::Ok();
}

Status GroupedGemmWorkspace::reserve(std::int64_t problems) {
  if (problems <= capacity_) return Status::Ok();
  const std::int64_t grown = std::max<std::int64_t>(problems, capacity_ * 2);
  // cudaFree waits for the device, so no queued GEMM still reads the old arrays.
  SY_RETURN_IF_ERROR(detail::check_cuda(locked_free(pointers_), "GroupedGemmWorkspace: cudaFree"));
  pointers_ = nullptr;
  capacity_ = 0;
  void* p = nullptr;
  SY_RETURN_IF_ERROR(detail::check_cuda(locked_malloc(&p, static_cast<std::size_t>(3 * grown) * sizeof(void*)),
                                        "GroupedGemmWorkspace: cudaMalloc"));
  pointers_ = static_cast<const void**>(p);
  capacity_ = grown;
  return Status::Ok();
}

Status grouped_linear_cuda(cublasHandle_t handle, const GroupedLinearProblem* problems, std::int64_t count,
                           std::int64_t N, std::int64_t K, DType type, GroupedGemmWorkspace& ws,
                           cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(count >= 0 && N > 0 && K > 0 && N <= INT_MAX && K <= INT_MAX,
                                     "grouped_linear_cuda: bad shape"));
  // Problems with rows, ordered by row count: cuBLAS wants each group's problems together,
  // and a group is the problems sharing m (here cuBLAS's n, see below).
  std::vector<std::int64_t> order;
  order.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    SY_RETURN_IF_ERROR(detail::require(problems[i].m >= 0 && problems[i].m <= INT_MAX, "grouped_linear_cuda: bad m"));
    if (problems[i].m > 0) order.push_back(i);
  }
  if (order.empty()) {
    ws.last_route = GroupedRoute::kNone;
    return Status::Ok();
  }

  std::vector<std::int64_t> ms(static_cast<std::size_t>(count));
  std::vector<const void*> weights;
  for (std::int64_t i = 0; i < count; ++i) {
    ms[static_cast<std::size_t>(i)] = problems[i].m;
    if (problems[i].m > 0) weights.push_back(problems[i].w);
  }
  const bool tensor_core = tensor_core_enabled(ws) && tensor_core_refusal(problems, count, N, K, type).empty();
  const std::int64_t max_m = *std::max_element(ms.begin(), ms.end());
  if (tensor_core && max_m >= kTensorCoreMinRows) {
    SY_RETURN_IF_ERROR(grouped_tensor_core_cuda(problems, count, N, K, type, ws, stream));
    ws.last_route = GroupedRoute::kTensorCore;
    return Status::Ok();
  }
  SmallMPlan plan;
  SY_RETURN_IF_ERROR(detail::plan_small_m_for(ms, weights, N, K, type, ws.small_m, plan));
  if (plan.use) {
    const std::int64_t esize = static_cast<std::int64_t>(dtype_size(type));
    std::vector<SmallMProblem> table;
    table.reserve(plan.pieces.size());
    for (const SmallMPiece& piece : plan.pieces) {
      const GroupedLinearProblem& p = problems[piece.problem];
      table.push_back({static_cast<const char*>(p.x) + piece.row0 * K * esize, nullptr, p.w, p.y + piece.row0 * N,
                       nullptr, static_cast<long long>(piece.rows)});
    }
    auto uploaded = detail::upload_small_m_table(table, ws, stream);
    if (!uploaded.ok()) return uploaded.status();
    SY_RETURN_IF_ERROR(grouped_small_m_cuda(plan, *uploaded, N, K, type, SmallMInput::kLow, stream));
    ws.last_route = GroupedRoute::kSmallM;
    return Status::Ok();
  }

  if (tensor_core) {
    SY_RETURN_IF_ERROR(grouped_tensor_core_cuda(problems, count, N, K, type, ws, stream));
    ws.last_route = GroupedRoute::kTensorCore;
    return Status::Ok();
  }

  std::stable_sort(order.begin(), order.end(),
                   [&](std::int64_t a, std::int64_t b) { return problems[a].m < problems[b].m; });
  const auto P = static_cast<std::int64_t>(order.size());
  SY_RETURN_IF_ERROR(ws.reserve(P));

  // cuBLAS is column-major. Row-major y[m, N] is column-major yᵀ [N, m] (ldc = N); row-major
  // W[N, K] read column-major is Wᵀ [K, N] (lda = K), so op(A) = T gives W; row-major x[m, K]
  // is column-major xᵀ [K, m] (ldb = K), op(B) = N. So yᵀ = W · xᵀ: cuBLAS (m, n, k) = (N, m, K),
  // exactly linear_bf16_cuda's call, once per problem.
  std::vector<const void*> host_pointers(static_cast<std::size_t>(3 * P));
  std::vector<int> group_m, group_size;
  for (std::int64_t j = 0; j < P; ++j) {
    const GroupedLinearProblem& p = problems[order[static_cast<std::size_t>(j)]];
    host_pointers[static_cast<std::size_t>(j)] = p.w;
    host_pointers[static_cast<std::size_t>(P + j)] = p.x;
    host_pointers[static_cast<std::size_t>(2 * P + j)] = p.y;
    const int m = static_cast<int>(p.m);
    if (group_m.empty() || group_m.back() != m) {
      group_m.push_back(m);
      group_size.push_back(0);
    }
    ++group_size.back();
  }
  const auto G = static_cast<int>(group_m.size());
  // From pageable memory, cudaMemcpyAsync returns once the source is staged, so the vector
  // may go; the copy is ordered before the GEMM on the stream.
  SY_RETURN_IF_ERROR(detail::check_cuda(cudaMemcpyAsync(ws.device_pointers(), host_pointers.data(),
                                                        host_pointers.size() * sizeof(void*), cudaMemcpyHostToDevice,
                                                        stream),
                                        "grouped_linear_cuda: pointer upload"));
  SY_RETURN_IF_ERROR(detail::use_stream(handle, stream));
  const cudaDataType_t t = cuda_type(type);
  const std::vector<cublasOperation_t> transa(static_cast<std::size_t>(G), CUBLAS_OP_T);
  const std::vector<cublasOperation_t> transb(static_cast<std::size_t>(G), CUBLAS_OP_N);
  const std::vector<int> m_arr(static_cast<std::size_t>(G), static_cast<int>(N));
  const std::vector<int> k_arr(static_cast<std::size_t>(G), static_cast<int>(K));
  const std::vector<int> lda(static_cast<std::size_t>(G), static_cast<int>(K));
  const std::vector<int> ldc(static_cast<std::size_t>(G), static_cast<int>(N));
  const std::vector<float> alpha(static_cast<std::size_t>(G), 1.0f), beta(static_cast<std::size_t>(G), 0.0f);
  const void* const* d_a = ws.device_pointers();
  const void* const* d_b = ws.device_pointers() + P;
  void* const* d_c = const_cast<void* const*>(ws.device_pointers() + 2 * P);
  const cublasStatus_t status = cublas().gemm_grouped_batched_ex(
      handle, transa.data(), transb.data(), m_arr.data(), group_m.data(), k_arr.data(), alpha.data(), d_a, t,
      lda.data(), d_b, t, lda.data(), beta.data(), d_c, CUDA_R_32F, ldc.data(), G, group_size.data(),
      CUBLAS_COMPUTE_32F);
  if (status == CUBLAS_STATUS_SUCCESS) {
    ws.last_route = GroupedRoute::kCublasGrouped;
    return Status::Ok();
  }
  if (status != CUBLAS_STATUS_NOT_SUPPORTED && status != CUBLAS_STATUS_INVALID_VALUE)
    return detail::check_cublas(status, "grouped_linear_cuda: cublasGemmGroupedBatchedEx");
  // This cuBLAS does not group these types (low-precision inputs with float32 output are not
  // in every version's list): the same problems one GemmEx each, recorded for the benchmark.
  ws.fell_back = true;
  ws.last_route = GroupedRoute::kCublasPerProblem;
  const float one = 1.0f, zero = 0.0f;
  for (std::int64_t j = 0; j < P; ++j) {
    const GroupedLinearProblem& p = problems[order[static_cast<std::size_t>(j)]];
    SY_RETURN_IF_ERROR(detail::check_cublas(
        cublas().gemm_ex(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(p.m),
                         static_cast<int>(K), &one, p.w, t, static_cast<int>(K), p.x, t, static_cast<int>(K), &zero,
                         p.y, CUDA_R_32F, static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "grouped_linear_cuda: cublasGemmEx"));
  }
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_grouped_gemm_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(convert_kernel)});
}

}  // namespace sy::kernels
