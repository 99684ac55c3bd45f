// Every kernel of kernels/cuda, listed, and their loading on a device before NCCL links carry
// rows there (docs/architecture.md, "Lazy module loading").
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "base/status.h"

namespace sy::kernels {

// Why: with CUDA's lazy loading (the default since CUDA 12.2) a kernel is loaded at its first
// launch, and loading may synchronise the context (CUDA programming guide, "Lazy Loading",
// "Potential Hazards": concurrent execution), i.e. wait for an NCCL kernel that spins until its
// peer's kernel runs, while that peer may be stuck the same way. Loaded beforehand, a first
// launch is an ordinary launch.
struct KernelEntry {
  const char* name;    // as written in the source, template arguments included
  const void* symbol;  // the host stub's address, as a <<<>>> launch passes it
};

// Every kernel (each template instantiation a launcher can pick) of every .cu file here.
std::vector<KernelEntry> registered_kernels();

// Loads each of registered_kernels() into the current device's context (cudaFuncGetAttributes,
// as NCCL does for its own kernels, then cuFuncLoad where the driver has it); an error names
// the kernel.
Status preload_kernels();

// Whether `symbol`'s kernel is loaded in the current device's context (cuFuncIsLoaded, CUDA
// 12.4 drivers and later); an error where the driver cannot say.
StatusOr<bool> kernel_loaded(const void* symbol);

// Whether this process loads modules lazily (cuModuleGetLoadingMode: CUDA_MODULE_LOADING, read
// once when CUDA starts).
StatusOr<bool> lazy_module_loading();

namespace detail {
// Each .cu file's kernels, appended to `out` (defined beside the kernels, which are private to it).
void add_argmax_kernels(std::vector<KernelEntry>& out);
void add_attention_prefill_kernels(std::vector<KernelEntry>& out);
void add_attention_split_kernels(std::vector<KernelEntry>& out);
void add_combine_kernels(std::vector<KernelEntry>& out);
void add_embedding_kernels(std::vector<KernelEntry>& out);
void add_expert_ffn_kernels(std::vector<KernelEntry>& out);
void add_grouped_gemm_kernels(std::vector<KernelEntry>& out);
void add_grouped_tensor_core_kernels(std::vector<KernelEntry>& out);
void add_grouped_small_m_kernels(std::vector<KernelEntry>& out);
void add_kv_cache_write_kernels(std::vector<KernelEntry>& out);
void add_linear_bf16_kernels(std::vector<KernelEntry>& out);
void add_paged_attention_kernels(std::vector<KernelEntry>& out);
void add_rmsnorm_kernels(std::vector<KernelEntry>& out);
void add_rope_kernels(std::vector<KernelEntry>& out);
void add_router_kernels(std::vector<KernelEntry>& out);
void add_sampling_kernels(std::vector<KernelEntry>& out);
void add_scale_rows_kernels(std::vector<KernelEntry>& out);
void add_silu_mul_kernels(std::vector<KernelEntry>& out);
}  // namespace detail

}  // namespace sy::kernels

// One entry: the kernel's name as written and its address (template arguments may hold commas).
#define SY_KERNEL_ENTRY(...) \
  ::sy::kernels::KernelEntry { #__VA_ARGS__, reinterpret_cast<const void*>(&__VA_ARGS__) }
