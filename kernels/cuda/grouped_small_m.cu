// grouped_small_m_cuda: the decode-sized problems of a grouped linear in one launch. With a
// handful of rows per expert the GEMMs are GEMVs bound by reading the weights from HBM, so
// each CTA streams the rows of one feature tile of one problem's weights exactly once with
// 16-byte loads and multiplies every weight it loads with all the piece's rows of x, which
// it keeps (rounded to the weight type, widened to float32) in shared memory.
#include <cuda_fp16.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.cuh"
#include "kernels/cuda/grouped_small_m.h"
#include "kernels/cuda/kernel_preload.h"

namespace sy::kernels {
namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarps = kSmallMThreads / 32;
constexpr int kR = kSmallMRowsPerWarp;

// f rounded to T and widened back: convert_kernel's roundings (grouped_gemm.cu), so x is what
// the cpu kernels multiply after convert_from_f32.
template <DType T>
__device__ __forceinline__ float round_to(float f) {
  if constexpr (T == DType::BF16) {
    unsigned bits = __float_as_uint(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) {
      bits = (bits >> 16) | 0x40u;
    } else {
      bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
    }
    return __uint_as_float(bits << 16);
  } else if constexpr (T == DType::F16) {
    return __half2float(__float2half_rn(f));
  } else {
    return f;
  }
}

// Element i of an array in T, widened exactly (bf16_to_f32, f16_to_f32 of kernels/cpu/dtype.h).
template <DType T>
__device__ __forceinline__ float load_low(const void* x, int i) {
  if constexpr (T == DType::F32) {
    return static_cast<const float*>(x)[i];
  } else {
    const unsigned short h = static_cast<const unsigned short*>(x)[i];
    if constexpr (T == DType::BF16) return __uint_as_float(static_cast<unsigned>(h) << 16);
    else return __half2float(__ushort_as_half(h));
  }
}

// The 16 bytes of one weight load as floats in memory order (element 2j is the low half of
// 32-bit word j: little endian).
template <DType T>
__device__ __forceinline__ void unpack(const uint4 v, float* out) {
  const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (T == DType::BF16) {
      out[2 * j] = __uint_as_float(u[j] << 16);
      out[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
    } else if constexpr (T == DType::F16) {
      out[2 * j] = __half2float(__ushort_as_half(static_cast<unsigned short>(u[j] & 0xffffu)));
      out[2 * j + 1] = __half2float(__ushort_as_half(static_cast<unsigned short>(u[j] >> 16)));
    } else {
      out[j] = __uint_as_float(u[j]);
    }
  }
}

// Reduce-scatter of C partial sums per lane over the warp's lanes: at each lane-bit O the lane
// keeps one half of its values (the upper half when its bit O is set), adds its partner's
// copy of that half, and so halves its values with one shuffle per kept value; once one
// value is left, plain butterfly steps finish the sum. Compared with a full butterfly per
// value (5·C shuffles) this takes C−1 + … shuffles, which matters at C = 64. Afterwards the
// lane holds max(1, C/32) complete sums: v[j] is original index base + j; when C < 32, the
// 32/C lanes that differ only in their lowest bits hold the same sums.
template <int C, int O>
__device__ __forceinline__ void scatter_sum(float* v, int lane, int& base) {
  if constexpr (O > 0) {
    if constexpr (C == 1) {
      v[0] += __shfl_xor_sync(kFull, v[0], O);
      scatter_sum<1, O / 2>(v, lane, base);
    } else {
      const bool upper = (lane & O) != 0;
#pragma unroll
      for (int i = 0; i < C / 2; ++i) {
        const float send = upper ? v[i] : v[i + C / 2];
        const float keep = upper ? v[i + C / 2] : v[i];
        v[i] = keep + __shfl_xor_sync(kFull, send, O);
      }
      if (upper) base += C / 2;
      scatter_sum<C / 2, O / 2>(v, lane, base);
    }
  }
}

// One CTA: piece blockIdx.x / tiles, output features [tile · rows_per_cta, +rows_per_cta) ∩
// [0, N). Each warp takes kR features at a time; lane l reads 16-byte chunks l, l+32, … of
// each of the kR weight rows, so a warp's loads of one row are 512 contiguous bytes. x lives
// in shared memory in planes of float4: plane p of chunk c of row r holds elements
// c·VE + 4p … +3, so that the 32 lanes' float4 reads of one plane are consecutive (no bank
// conflicts, where one row-major 32-byte chunk per lane would conflict two-way).
// The tile's outputs are pr.y = (accumulate ? pr.y : 0) + bias + (x·Wᵀ) ⊙ scale: the grouped
// kernel passes neither bias nor accumulate, the dense one (small_m_dense_kernel) may.
template <int MT, DType T>
__device__ __forceinline__ void small_m_tile(const SmallMProblem& pr, int N, int K, int rows_per_cta, int tile,
                                             SmallMInput input, const float* __restrict__ bias, bool accumulate) {
  constexpr int VE = T == DType::F32 ? 4 : 8;  // elements per 16-byte load
  constexpr int PL = VE / 4;                   // float4 planes per chunk
  extern __shared__ float4 xs4[];
  float* xs = reinterpret_cast<float*>(xs4);
  const int m = static_cast<int>(pr.rows);  // 1..MT (the plan sized MT and the shared memory)
  const int chunks = K / VE;                // K % VE == 0 (plan_small_m)

  // m · K ≤ smem_limit / 4, so int indices hold. Row by row: no division by K per element.
  for (int r = 0; r < m; ++r) {
    for (int k = static_cast<int>(threadIdx.x); k < K; k += kSmallMThreads) {
      const int e = r * K + k;
      float v;
      if (input == SmallMInput::kLow) {
        v = load_low<T>(pr.x, e);
      } else if (input == SmallMInput::kF32) {
        v = round_to<T>(static_cast<const float*>(pr.x)[e]);
      } else {
        // silu_mul_low_kernel's expression (expert_ffn.cu), then its rounding.
        const float g = static_cast<const float*>(pr.x)[e];
        v = round_to<T>(g / (1.0f + expf(-g)) * pr.x2[e]);
      }
      const int c = k / VE, q = k - c * VE;
      xs[((r * PL + q / 4) * chunks + c) * 4 + (q & 3)] = v;
    }
  }
  __syncthreads();

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const long long row_end = min(static_cast<long long>(N), static_cast<long long>(tile + 1) * rows_per_cta);
  const std::size_t row_bytes = static_cast<std::size_t>(K) * (16 / VE);
  for (long long n0 = static_cast<long long>(tile) * rows_per_cta + warp * kR; n0 < row_end; n0 += kWarps * kR) {
    // Features past N (when N % kR != 0) read row N−1 again and are not stored.
    const uint4* wr[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) {
      const long long n = min(n0 + i, static_cast<long long>(N) - 1);
      wr[i] = reinterpret_cast<const uint4*>(static_cast<const char*>(pr.w) + static_cast<std::size_t>(n) * row_bytes);
    }
    float acc[MT * kR];  // acc[r · kR + i]: x row r times weight row n0 + i
#pragma unroll
    for (int j = 0; j < MT * kR; ++j) acc[j] = 0.0f;
#pragma unroll 2
    for (int c = lane; c < chunks; c += 32) {
      float wf[kR][VE];
#pragma unroll
      for (int i = 0; i < kR; ++i) unpack<T>(__ldcs(wr[i] + c), wf[i]);  // streamed: read once
#pragma unroll
      for (int r = 0; r < MT; ++r) {
        if (r < m) {  // uniform across the CTA
          float xv[VE];
#pragma unroll
          for (int p = 0; p < PL; ++p) {
            const float4 t = xs4[(r * PL + p) * chunks + c];
            xv[4 * p] = t.x;
            xv[4 * p + 1] = t.y;
            xv[4 * p + 2] = t.z;
            xv[4 * p + 3] = t.w;
          }
#pragma unroll
          for (int i = 0; i < kR; ++i) {
#pragma unroll
            for (int e = 0; e < VE; ++e) acc[r * kR + i] = fmaf(wf[i][e], xv[e], acc[r * kR + i]);
          }
        }
      }
    }
    constexpr int V = MT * kR;
    int base = 0;
    scatter_sum<V, 16>(acc, lane, base);
    bool writer = true;
    if constexpr (V < 32) writer = (lane & (32 / V - 1)) == 0;
    if (writer) {
      constexpr int held = V >= 32 ? V / 32 : 1;
#pragma unroll
      for (int j = 0; j < held; ++j) {
        const int idx = base + j;
        const int r = idx / kR;
        const long long n = n0 + idx % kR;
        if (r < m && n < N) {
          float out = acc[j];
          if (pr.scale != nullptr) out = out * pr.scale[r];  // as scale_rows_kernel: y · scale
          float* y = pr.y + static_cast<long long>(r) * N + n;
          // linear_cuda's bias and accumulate: cuBLAS adds x·Wᵀ to (accumulate ? y : 0) + bias.
          if (bias != nullptr || accumulate) out += (accumulate ? *y : 0.0f) + (bias != nullptr ? bias[n] : 0.0f);
          *y = out;
        }
      }
    }
  }
}

template <int MT, DType T>
__global__ void __launch_bounds__(kSmallMThreads)
    small_m_kernel(const SmallMProblem* __restrict__ table, int N, int K, int rows_per_cta, int tiles,
                   SmallMInput input) {
  const int piece = static_cast<int>(blockIdx.x / static_cast<unsigned>(tiles));
  const int tile = static_cast<int>(blockIdx.x % static_cast<unsigned>(tiles));
  const SmallMProblem pr = table[piece];
  small_m_tile<MT, T>(pr, N, K, rows_per_cta, tile, input, nullptr, false);
}

// One dense linear's call, by value: a graph captures it with the launch, so a replay needs no
// table in device memory (the grouped kernel's table is uploaded per call).
struct DenseArgs {
  const float* x;
  const float* x2;     // silu·mul's up rows, or null
  const float* scale;  // [m] row weights, or null
  int m;
  int count;
  const void* w[kDenseSmallMMaxOutputs];
  float* y[kDenseSmallMMaxOutputs];
  const float* bias[kDenseSmallMMaxOutputs];
  int N[kDenseSmallMMaxOutputs];
  int tiles_begin[kDenseSmallMMaxOutputs + 1];  // CTA b works on output j where tiles_begin[j] ≤ b < tiles_begin[j + 1]
};

// Up to kDenseSmallMMaxOutputs linears of one input x [m, K] (m ≤ kSmallMPieceRows: one piece),
// x float32 rounded on the way in (or silu(x)·x2, rounded) as the grouped kernel's kF32 / kSiluMul.
template <int MT, DType T>
__global__ void __launch_bounds__(kSmallMThreads)
    small_m_dense_kernel(const DenseArgs a, int K, int rows_per_cta, bool accumulate) {
  const int b = static_cast<int>(blockIdx.x);
  int j = 0;
#pragma unroll
  for (int i = 1; i < kDenseSmallMMaxOutputs; ++i)
    if (i < a.count && b >= a.tiles_begin[i]) j = i;
  const SmallMProblem pr{a.x, a.x2, a.w[j], a.y[j], a.scale, a.m};
  small_m_tile<MT, T>(pr, a.N[j], K, rows_per_cta, b - a.tiles_begin[j],
                      a.x2 != nullptr ? SmallMInput::kSiluMul : SmallMInput::kF32, a.bias[j], accumulate);
}

// Above 48 KiB a kernel must opt in. The attribute is the device's limit rather than this
// launch's size, so concurrent callers with other sizes never undo each other, and it is set
// once per device (bit d of opted_in) rather than a driver call per layer.
template <typename Kernel>
Status opt_in_shared_memory(Kernel* kernel, std::size_t smem_bytes, std::size_t smem_limit,
                            std::atomic<unsigned long long>& opted_in, const char* what) {
  if (smem_bytes <= 48 * 1024) return Status::Ok();
  int device = 0;
  SY_RETURN_IF_ERROR(detail::check_cuda(cudaGetDevice(&device), what));
  const unsigned long long bit = device >= 0 && device < 64 ? 1ull << device : 0ull;
  if (bit != 0 && (opted_in.load() & bit) != 0) return Status::Ok();
  SY_RETURN_IF_ERROR(detail::check_cuda(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem_limit)), what));
  opted_in.fetch_or(bit);
  return Status::Ok();
}

template <int MT, DType T>
Status launch(const SmallMPlan& plan, const SmallMProblem* table, int N, int K, SmallMInput input,
              cudaStream_t stream) {
  auto* kernel = &small_m_kernel<MT, T>;
  static std::atomic<unsigned long long> opted_in{0};
  SY_RETURN_IF_ERROR(opt_in_shared_memory(kernel, plan.smem_bytes, plan.smem_limit, opted_in,
                                          "grouped_small_m_cuda: shared memory attribute"));
  kernel<<<static_cast<unsigned>(plan.blocks), kSmallMThreads, plan.smem_bytes, stream>>>(
      table, N, K, plan.rows_per_cta, static_cast<int>(plan.tiles_per_piece), input);
  return detail::check_launch("grouped_small_m_cuda");
}

template <DType T>
Status launch_type(const SmallMPlan& plan, const SmallMProblem* table, int N, int K, SmallMInput input,
                   cudaStream_t stream) {
  switch (plan.m_tile) {
    case 1: return launch<1, T>(plan, table, N, K, input, stream);
    case 2: return launch<2, T>(plan, table, N, K, input, stream);
    case 4: return launch<4, T>(plan, table, N, K, input, stream);
    case 8: return launch<8, T>(plan, table, N, K, input, stream);
    case 16: return launch<16, T>(plan, table, N, K, input, stream);
    default: return Status::Error("grouped_small_m_cuda: no kernel for this m tile");
  }
}

template <int MT, DType T>
Status launch_dense(const DenseSmallMPlan& plan, const DenseArgs& args, int K, bool accumulate, cudaStream_t stream) {
  auto* kernel = &small_m_dense_kernel<MT, T>;
  static std::atomic<unsigned long long> opted_in{0};
  SY_RETURN_IF_ERROR(opt_in_shared_memory(kernel, plan.smem_bytes, plan.smem_limit, opted_in,
                                          "dense_small_m_cuda: shared memory attribute"));
  kernel<<<static_cast<unsigned>(plan.blocks), kSmallMThreads, plan.smem_bytes, stream>>>(args, K, plan.rows_per_cta,
                                                                                         accumulate);
  return detail::check_launch("dense_small_m_cuda");
}

template <DType T>
Status launch_dense_type(const DenseSmallMPlan& plan, const DenseArgs& args, int K, bool accumulate,
                         cudaStream_t stream) {
  switch (plan.m_tile) {
    case 1: return launch_dense<1, T>(plan, args, K, accumulate, stream);
    case 2: return launch_dense<2, T>(plan, args, K, accumulate, stream);
    case 4: return launch_dense<4, T>(plan, args, K, accumulate, stream);
    case 8: return launch_dense<8, T>(plan, args, K, accumulate, stream);
    case 16: return launch_dense<16, T>(plan, args, K, accumulate, stream);
    default: return Status::Error("dense_small_m_cuda: no kernel for this m tile");
  }
}

}  // namespace

Status dense_small_m_cuda(const DenseSmallMPlan& plan, const float* x, const float* x2, const float* scale,
                          std::int64_t m, std::int64_t K, DType type, const DenseSmallMOutput* outs, int count,
                          bool accumulate, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(plan.use && plan.blocks > 0 && m >= 1 && m <= plan.m_tile && K > 0 &&
                                         K % small_m_vector_elems(type) == 0 && count >= 1 &&
                                         count <= kDenseSmallMMaxOutputs &&
                                         plan.tiles_begin.size() == static_cast<std::size_t>(count) + 1,
                                     "dense_small_m_cuda: a plan that does not fit the call"));
  DenseArgs args{};
  args.x = x;
  args.x2 = x2;
  args.scale = scale;
  args.m = static_cast<int>(m);
  args.count = count;
  for (int j = 0; j < count; ++j) {
    args.w[j] = outs[j].w;
    args.y[j] = outs[j].y;
    args.bias[j] = outs[j].bias;
    args.N[j] = static_cast<int>(outs[j].N);
    args.tiles_begin[j] = static_cast<int>(plan.tiles_begin[static_cast<std::size_t>(j)]);
  }
  args.tiles_begin[count] = static_cast<int>(plan.blocks);
  const int k = static_cast<int>(K);
  switch (type) {
    case DType::BF16: return launch_dense_type<DType::BF16>(plan, args, k, accumulate, stream);
    case DType::F16: return launch_dense_type<DType::F16>(plan, args, k, accumulate, stream);
    case DType::F32: return launch_dense_type<DType::F32>(plan, args, k, accumulate, stream);
  }
  return Status::Error("dense_small_m_cuda: unknown weight type");
}

static_assert(kSmallMPieceRows == 16, "launch_type instantiates m tiles up to 16");

Status grouped_small_m_cuda(const SmallMPlan& plan, const SmallMProblem* table, std::int64_t N, std::int64_t K,
                            DType type, SmallMInput input, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(plan.use && plan.blocks > 0 && N > 0 && K > 0 &&
                                         K % small_m_vector_elems(type) == 0,
                                     "grouped_small_m_cuda: a plan that does not fit the call"));
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  switch (type) {
    case DType::BF16: return launch_type<DType::BF16>(plan, table, n, k, input, stream);
    case DType::F16: return launch_type<DType::F16>(plan, table, n, k, input, stream);
    case DType::F32: return launch_type<DType::F32>(plan, table, n, k, input, stream);
  }
  return Status::Error("grouped_small_m_cuda: unknown weight type");
}

namespace detail {

StatusOr<const SmallMProblem*> upload_small_m_table(const std::vector<SmallMProblem>& table,
                                                    GroupedGemmWorkspace& ws, cudaStream_t stream) {
  const std::size_t bytes = table.size() * sizeof(SmallMProblem);
  SY_RETURN_IF_ERROR(ws.reserve_table(bytes));
  SY_RETURN_IF_ERROR(detail::check_cuda(cudaMemcpyAsync(ws.table(), table.data(), bytes, cudaMemcpyHostToDevice, stream),
                                        "small-m problem table upload"));
  return static_cast<const SmallMProblem*>(ws.table());
}

Status plan_small_m_for(const std::vector<std::int64_t>& ms, const std::vector<const void*>& weights, std::int64_t N,
                        std::int64_t K, DType type, bool enabled, SmallMPlan& plan) {
  SmallMRequest request;
  request.ms = ms;
  request.N = N;
  request.K = K;
  request.type = type;
  request.enabled = enabled && small_m_enabled_by_env();
  request.weights_aligned = true;
  for (const void* w : weights) request.weights_aligned = request.weights_aligned && reinterpret_cast<std::uintptr_t>(w) % 16 == 0;
  // Ask the device only when the cheap conditions leave the kernel a chance.
  if (request.enabled && request.weights_aligned) SY_RETURN_IF_ERROR(small_m_device_limits(request.smem_limit, request.sm_count));
  plan = plan_small_m(request);
  return Status::Ok();
}

}  // namespace detail

Status small_m_device_limits(std::size_t& smem_limit, int& sm_count) {
  int device = 0;
  SY_RETURN_IF_ERROR(detail::check_cuda(cudaGetDevice(&device), "grouped_small_m_cuda: cudaGetDevice"));
  // Read once per device: every grouped and dense call of every layer plans with them.
  static std::mutex mutex;
  static std::map<int, std::pair<std::size_t, int>> known;
  {
    std::lock_guard lock(mutex);
    if (const auto it = known.find(device); it != known.end()) {
      std::tie(smem_limit, sm_count) = it->second;
      return Status::Ok();
    }
  }
  int smem = 0, sms = 0;
  SY_RETURN_IF_ERROR(detail::check_cuda(
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), "grouped_small_m_cuda: smem"));
  SY_RETURN_IF_ERROR(detail::check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
                                        "grouped_small_m_cuda: SM count"));
  smem_limit = static_cast<std::size_t>(smem);
  sm_count = sms;
  std::lock_guard lock(mutex);
  known[device] = {smem_limit, sm_count};
  return Status::Ok();
}

Status plan_dense_small_m_for(std::int64_t m, std::int64_t K, DType type, const DenseSmallMOutput* outs, int count,
                              DenseSmallMPlan& plan) {
  DenseSmallMRequest request;
  request.m = m;
  request.K = K;
  request.type = type;
  request.weights_aligned = true;
  for (int j = 0; j < count; ++j) {
    request.Ns.push_back(outs[j].N);
    request.weights_aligned = request.weights_aligned && reinterpret_cast<std::uintptr_t>(outs[j].w) % 16 == 0;
  }
  if (request.weights_aligned) SY_RETURN_IF_ERROR(small_m_device_limits(request.smem_limit, request.sm_count));
  plan = plan_dense_small_m(request);
  return Status::Ok();
}

// Every kernel of this file, for preload_kernels: each m tile and weight type launch_type can pick.
void detail::add_grouped_small_m_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(small_m_kernel<1, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_kernel<2, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_kernel<4, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_kernel<8, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_kernel<16, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_kernel<1, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_kernel<2, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_kernel<4, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_kernel<8, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_kernel<16, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_kernel<1, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_kernel<2, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_kernel<4, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_kernel<8, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_kernel<16, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<1, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<2, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<4, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<8, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<16, DType::BF16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<1, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<2, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<4, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<8, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<16, DType::F16>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<1, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<2, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<4, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<8, DType::F32>),
                         SY_KERNEL_ENTRY(small_m_dense_kernel<16, DType::F32>)});
}

}  // namespace sy::kernels
