// cuBLAS's entry points, loaded from its shared library when a GPU backend first needs them.
// Linking libcublas (and with it libcublasLt) made every process that links the engine run
// their static initialisers and relocations before main, about 75 M instructions: each sim run
// and each test paid more for that than a second of simulated cluster time costs.
#pragma once

#include <cublas_v2.h>

#include <string>
#include <type_traits>

namespace sy::kernels {

// cublasGemmEx has a C++ overload taking the legacy cudaDataType compute type: the C entry point.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                        const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                        const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(std::is_same_v<decltype(static_cast<CublasGemmEx>(&::cublasGemmEx)), CublasGemmEx>);

// The calls the kernels and the cuda backend make, with cuBLAS's own signatures.
struct CublasLibrary {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSetStream_v2) set_stream;
  decltype(&::cublasGetStream_v2) get_stream;
  decltype(&::cublasSetWorkspace_v2) set_workspace;
  CublasGemmEx gemm_ex;
  decltype(&::cublasGemmGroupedBatchedEx) gemm_grouped_batched_ex;
  decltype(&::cublasGetStatusString) status_string;
};

// Loads the library once per process (thread-safe) and returns its entry points, or nullptr
// when the library or one of the entry points cannot be loaded; cublas_library_problem() then
// names the library and says why.
const CublasLibrary* cublas_library();
// Empty once the library is loaded; otherwise why it cannot be (dlopen's or dlsym's message).
std::string cublas_library_problem();
// For code that holds a cuBLAS handle, which only a loaded library can have made.
const CublasLibrary& cublas();
// The library's file name, libcublas.so.<CUDA major version of this build>.
const char* cublas_soname();

}  // namespace sy::kernels
