#include "kernels/cuda/kernel_preload.h"

#include <cuda.h>  // the driver's types; its functions come through cudaGetDriverEntryPointByVersion

#include <string>

namespace sy::kernels {
namespace {

// A driver function by name, at the CUDA version that introduced it; null where this driver
// lacks it. Through the runtime, so that nothing links libcuda (absent on build machines).
template <typename F>
F driver_function(const char* name, unsigned version) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &p, version, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<F>(p);
}

std::string cuda_error(const KernelEntry& k, const char* call, cudaError_t e) {
  return std::string("loading kernel ") + k.name + ": " + call + ": " + cudaGetErrorString(e);
}

}  // namespace

std::vector<KernelEntry> registered_kernels() {
  std::vector<KernelEntry> out;
  detail::add_argmax_kernels(out);
  detail::add_attention_prefill_kernels(out);
  detail::add_attention_split_kernels(out);
  detail::add_combine_kernels(out);
  detail::add_embedding_kernels(out);
  detail::add_expert_ffn_kernels(out);
  detail::add_grouped_gemm_kernels(out);
  detail::add_grouped_small_m_kernels(out);
  detail::add_grouped_tensor_core_kernels(out);
  detail::add_kv_cache_write_kernels(out);
  detail::add_linear_bf16_kernels(out);
  detail::add_paged_attention_kernels(out);
  detail::add_rmsnorm_kernels(out);
  detail::add_rope_kernels(out);
  detail::add_router_kernels(out);
  detail::add_sampling_kernels(out);
  detail::add_scale_rows_kernels(out);
  detail::add_silu_mul_kernels(out);
  return out;
}

Status preload_kernels() {
  using FuncLoad = CUresult (*)(CUfunction);
  const auto func_load = driver_function<FuncLoad>("cuFuncLoad", 12040);
  for (const KernelEntry& k : registered_kernels()) {
    // Attributes such as maxThreadsPerBlock need the loaded function, so the runtime loads it
    // (NCCL relies on this for its own kernels, ncclInitKernelsForDevice).
    cudaFuncAttributes attributes{};
    if (const cudaError_t e = cudaFuncGetAttributes(&attributes, k.symbol); e != cudaSuccess)
      return Status::Error(cuda_error(k, "cudaFuncGetAttributes", e));
    if (!func_load) continue;
    // And explicitly, where the driver has the call for it: "finalizes function loading".
    cudaFunction_t f = nullptr;
    if (const cudaError_t e = cudaGetFuncBySymbol(&f, k.symbol); e != cudaSuccess)
      return Status::Error(cuda_error(k, "cudaGetFuncBySymbol", e));
    if (const CUresult r = func_load(reinterpret_cast<CUfunction>(f)); r != CUDA_SUCCESS)
      return Status::Error(std::string("loading kernel ") + k.name + ": cuFuncLoad: CUresult " + std::to_string(r));
  }
  return Status::Ok();
}

StatusOr<bool> kernel_loaded(const void* symbol) {
  using FuncIsLoaded = CUresult (*)(CUfunctionLoadingState*, CUfunction);
  const auto is_loaded = driver_function<FuncIsLoaded>("cuFuncIsLoaded", 12040);
  if (!is_loaded) return Status::Error("this driver has no cuFuncIsLoaded (CUDA 12.4 and later)");
  cudaFunction_t f = nullptr;
  if (const cudaError_t e = cudaGetFuncBySymbol(&f, symbol); e != cudaSuccess)
    return Status::Error(std::string("cudaGetFuncBySymbol: ") + cudaGetErrorString(e));
  CUfunctionLoadingState state = CU_FUNCTION_LOADING_STATE_UNLOADED;
  if (const CUresult r = is_loaded(&state, reinterpret_cast<CUfunction>(f)); r != CUDA_SUCCESS)
    return Status::Error("cuFuncIsLoaded: CUresult " + std::to_string(r));
  return state == CU_FUNCTION_LOADING_STATE_LOADED;
}

StatusOr<bool> lazy_module_loading() {
  using GetLoadingMode = CUresult (*)(CUmoduleLoadingMode*);
  const auto get_mode = driver_function<GetLoadingMode>("cuModuleGetLoadingMode", 11070);
  if (!get_mode) return Status::Error("this driver has no cuModuleGetLoadingMode (CUDA 11.7 and later)");
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  if (const CUresult r = get_mode(&mode); r != CUDA_SUCCESS)
    return Status::Error("cuModuleGetLoadingMode: CUresult " + std::to_string(r));
  return mode == CU_MODULE_LAZY_LOADING;
}

}  // namespace sy::kernels
