// swiglu_experts_cuda: the SwiGLU experts of one execution as three grouped GEMMs (gate and up
// in one call, down in another) around three kernels that gather-and-convert the inputs,
// fuse silu·up with the conversion, and apply the routing weights.
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

// One expert's rows: where its input comes from, where its output goes, and its rows' place
// in the workspace (row0 .. row0 + m).
struct Segment {
  const float* x;
  float* y;
  const float* scale;
  long long row0;
  long long m;
};

__device__ __forceinline__ void store_low(void* dst, long long i, float f, DType type) {
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

// blockIdx.y: the segment; its m·H input floats go to x_low rows row0.. in the weight type.
__global__ void gather_convert_kernel(const Segment* __restrict__ segs, long long H, void* x_low, DType type) {
  const Segment s = segs[blockIdx.y];
  const long long n = s.m * H;
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
    store_low(x_low, s.row0 * H + i, s.x[i], type);
}

// h = silu(g)·u (torch's x / (1 + exp(-x)), as silu_mul) rounded to the weight type.
__global__ void silu_mul_low_kernel(const float* __restrict__ g, const float* __restrict__ u, void* h, DType type,
                                    long long n) {
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride) {
    const float x = g[i];
    store_low(h, i, x / (1.0f + expf(-x)) * u[i], type);
  }
}

// y row r *= scale[r], after the down projection as HF and swiglu_ffn do.
__global__ void scale_rows_kernel(const Segment* __restrict__ segs, long long H) {
  const Segment s = segs[blockIdx.y];
  if (s.scale == nullptr) return;
  const long long n = s.m * H;
  const long long stride = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += stride)
    s.y[i] = s.y[i] * s.scale[i / H];
}

}  // namespace

ExpertWorkspace::~ExpertWorkspace() {
  locked_free(x_low);
  locked_free(gate_out);
  locked_free(up_out);
  locked_free(h_low);
  locked_free(segments);
}

Status ExpertWorkspace::reserve(std::int64_t rows, std::int64_t H, std::int64_t I, std::int64_t problems) {
  // Each buffer grows on its own (geometrically), so FFNs of different widths on one worker
  // (routed, shared and dense ones) do not reallocate in turn. cudaFree waits for the device,
  // so nothing queued still uses an old buffer. 4 bytes per element: room for any weight type.
  auto grow = [](void** buffer, std::int64_t& capacity, std::int64_t need, const char* what) -> Status {
    if (need <= capacity) return Status::Ok();
    const std::int64_t n = std::max(need, capacity + capacity / 2);
    SY_RETURN_IF_ERROR(detail::check_cuda(locked_free(*buffer), what));
    *buffer = nullptr;
    capacity = 0;
    SY_RETURN_IF_ERROR(detail::check_cuda(locked_malloc(buffer, static_cast<std::size_t>(n) * 4), what));
    capacity = n;
    return Status::Ok();
  };
  SY_RETURN_IF_ERROR(grow(&x_low, x_capacity, rows * H, "ExpertWorkspace: activations"));
  SY_RETURN_IF_ERROR(grow(reinterpret_cast<void**>(&gate_out), gate_capacity, rows * I, "ExpertWorkspace: gate"));
  SY_RETURN_IF_ERROR(grow(reinterpret_cast<void**>(&up_out), up_capacity, rows * I, "ExpertWorkspace: up"));
  SY_RETURN_IF_ERROR(grow(&h_low, h_capacity, rows * I, "ExpertWorkspace: silu"));
  const auto segment_words = static_cast<std::int64_t>((sizeof(Segment) + 3) / 4);
  SY_RETURN_IF_ERROR(grow(&segments, segments_capacity, problems * segment_words, "ExpertWorkspace: segments"));
  return gemm.reserve(2 * problems);
}

Status swiglu_experts_cuda(cublasHandle_t handle, const ExpertProblem* problems, std::int64_t count,
                           std::int64_t H, std::int64_t I, DType type, ExpertWorkspace& ws, cudaStream_t stream) {
  SY_RETURN_IF_ERROR(detail::require(count >= 0 && H > 0 && I > 0, "swiglu_experts_cuda: bad shape"));
  std::vector<Segment> segs;
  segs.reserve(static_cast<std::size_t>(count));
  std::int64_t rows = 0, max_m = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const ExpertProblem& p = problems[i];
    SY_RETURN_IF_ERROR(detail::require(p.m >= 0, "swiglu_experts_cuda: negative row count"));
    if (p.m == 0) continue;
    segs.push_back({p.x, p.y, p.row_scale, rows, p.m});
    rows += p.m;
    max_m = std::max(max_m, p.m);
  }
  if (segs.empty()) return Status::Ok();
  const auto P = static_cast<std::int64_t>(segs.size());
  SY_RETURN_IF_ERROR(detail::require(P <= 65535, "swiglu_experts_cuda: more than 65535 experts in one call"));
  SY_RETURN_IF_ERROR(ws.reserve(rows, H, I, P));

  // Decode-sized experts: our small-m kernel, gate and up of every expert in one launch, then
  // down in another; the gather-convert, silu·u and scale kernels are folded into them.
  std::vector<const ExpertProblem*> live;
  std::vector<std::int64_t> ms_gate_up, ms_down;
  std::vector<const void*> w_gate_up, w_down;
  for (std::int64_t i = 0; i < count; ++i) {
    const ExpertProblem& p = problems[i];
    if (p.m == 0) continue;
    live.push_back(&p);
    ms_gate_up.insert(ms_gate_up.end(), {p.m, p.m});  // problem 2e: gate, 2e + 1: up
    ms_down.push_back(p.m);
    w_gate_up.insert(w_gate_up.end(), {p.gate, p.up});
    w_down.push_back(p.down);
  }
  // From kTensorCoreMinRows rows the tensor-core kernel is the faster (grouped_tensor_core.h):
  // the grouped path below, whose GEMMs take it, instead of the small-m kernel's two launches.
  const bool tensor_core = tensor_core_enabled(ws.gemm) && max_m >= kTensorCoreMinRows &&
                           tensor_core_shape_refusal(I, H, type).empty() &&
                           tensor_core_shape_refusal(H, I, type).empty();
  SmallMPlan plan_gate_up, plan_down;
  SY_RETURN_IF_ERROR(detail::plan_small_m_for(ms_gate_up, w_gate_up, I, H, type, ws.gemm.small_m && !tensor_core,
                                              plan_gate_up));
  if (plan_gate_up.use)
    SY_RETURN_IF_ERROR(detail::plan_small_m_for(ms_down, w_down, H, I, type, ws.gemm.small_m, plan_down));
  if (plan_gate_up.use && plan_down.use) {
    std::vector<SmallMProblem> table;
    table.reserve(plan_gate_up.pieces.size() + plan_down.pieces.size());
    for (const SmallMPiece& piece : plan_gate_up.pieces) {
      const std::size_t e = static_cast<std::size_t>(piece.problem / 2);
      const bool up = piece.problem % 2 == 1;
      const Segment& sg = segs[e];
      float* out = (up ? ws.up_out : ws.gate_out) + (sg.row0 + piece.row0) * I;
      table.push_back({sg.x + piece.row0 * H, nullptr, up ? live[e]->up : live[e]->gate, out, nullptr,
                       static_cast<long long>(piece.rows)});
    }
    for (const SmallMPiece& piece : plan_down.pieces) {
      const std::size_t e = static_cast<std::size_t>(piece.problem);
      const Segment& sg = segs[e];
      const std::int64_t row = sg.row0 + piece.row0;
      table.push_back({ws.gate_out + row * I, ws.up_out + row * I, live[e]->down, sg.y + piece.row0 * H,
                       sg.scale != nullptr ? sg.scale + piece.row0 : nullptr, static_cast<long long>(piece.rows)});
    }
    auto uploaded = detail::upload_small_m_table(table, ws.gemm, stream);
    if (!uploaded.ok()) return uploaded.status();
    const SmallMProblem* d_table = *uploaded;
    SY_RETURN_IF_ERROR(grouped_small_m_cuda(plan_gate_up, d_table, I, H, type, SmallMInput::kF32, stream));
    SY_RETURN_IF_ERROR(grouped_small_m_cuda(plan_down, d_table + plan_gate_up.pieces.size(), H, I, type,
                                            SmallMInput::kSiluMul, stream));
    ws.gemm.last_route = GroupedRoute::kSmallM;
    return Status::Ok();
  }

  // Pageable source: staged before the call returns, ordered before the kernels on the stream.
  SY_RETURN_IF_ERROR(detail::check_cuda(cudaMemcpyAsync(ws.segments, segs.data(), segs.size() * sizeof(Segment),
                                                        cudaMemcpyHostToDevice, stream),
                                        "swiglu_experts_cuda: segment upload"));
  const auto* d_segs = static_cast<const Segment*>(ws.segments);
  const std::int64_t esize = static_cast<std::int64_t>(dtype_size(type));
  const dim3 per_segment(detail::grid_for(max_m * H, kThreads, 1024), static_cast<unsigned>(P));
  gather_convert_kernel<<<per_segment, kThreads, 0, stream>>>(d_segs, H, ws.x_low, type);
  SY_RETURN_IF_ERROR(detail::check_launch("swiglu_experts_cuda (gather)"));

  std::vector<GroupedLinearProblem> gemms;
  gemms.reserve(static_cast<std::size_t>(2 * P));
  std::size_t si = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const ExpertProblem& p = problems[i];
    if (p.m == 0) continue;
    const Segment& s = segs[si++];
    const void* x = static_cast<const char*>(ws.x_low) + s.row0 * H * esize;
    gemms.push_back({x, p.gate, ws.gate_out + s.row0 * I, p.m});
    gemms.push_back({x, p.up, ws.up_out + s.row0 * I, p.m});
  }
  SY_RETURN_IF_ERROR(grouped_linear_cuda(handle, gemms.data(), static_cast<std::int64_t>(gemms.size()), I, H, type,
                                         ws.gemm, stream));
  silu_mul_low_kernel<<<detail::grid_for(rows * I, kThreads), kThreads, 0, stream>>>(ws.gate_out, ws.up_out, ws.h_low,
                                                                                       type, rows * I);
  SY_RETURN_IF_ERROR(detail::check_launch("swiglu_experts_cuda (silu)"));
  gemms.clear();
  si = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const ExpertProblem& p = problems[i];
    if (p.m == 0) continue;
    const Segment& s = segs[si++];
    gemms.push_back({static_cast<const char*>(ws.h_low) + s.row0 * I * esize, p.down, p.y, p.m});
  }
  SY_RETURN_IF_ERROR(grouped_linear_cuda(handle, gemms.data(), static_cast<std::int64_t>(gemms.size()), H, I, type,
                                         ws.gemm, stream));
  scale_rows_kernel<<<per_segment, kThreads, 0, stream>>>(d_segs, H);
  return detail::check_launch("swiglu_experts_cuda (scale)");
}

// Every kernel of this file, for preload_kernels (kernel_preload.h).
void detail::add_expert_ffn_kernels(std::vector<KernelEntry>& out) {
  out.insert(out.end(), {SY_KERNEL_ENTRY(gather_convert_kernel),
                         SY_KERNEL_ENTRY(silu_mul_low_kernel),
                         SY_KERNEL_ENTRY(scale_rows_kernel)});
}

}  // namespace sy::kernels
