// cublas_library (cublas_library.h): dlopen of libcublas on first use.
#include "kernels/cuda/cublas_library.h"

#include <dlfcn.h>

#include <cassert>

namespace sy::kernels {
namespace {

struct Loaded {
  CublasLibrary api{};
  std::string problem;  // empty: loaded
};

// The soname first, found as the linker would (the executable's run path, LD_LIBRARY_PATH,
// the cache); then the toolkit's directory this build was configured with.
void* open_library(std::string& problem) {
  for (const std::string& name : {std::string(SY_CUBLAS_SONAME), std::string(SY_CUBLAS_DIR) + "/" + SY_CUBLAS_SONAME}) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* why = dlerror();
    if (problem.empty()) problem = "cannot load " + name + ": " + (why ? why : "unknown error");
  }
  return nullptr;
}

template <class F>
bool resolve(void* handle, const char* symbol, F& out, std::string& problem) {
  out = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!out && problem.empty()) problem = std::string(SY_CUBLAS_SONAME) + " lacks " + symbol;
  return out != nullptr;
}

const Loaded& loaded() {
  static const Loaded library = [] {
    Loaded l;
    void* handle = open_library(l.problem);
    if (!handle) return l;
    l.problem.clear();
    CublasLibrary& a = l.api;
    // The _v2 names are what cublas_v2.h's macros (cublasCreate, ...) call.
    resolve(handle, "cublasCreate_v2", a.create, l.problem);
    resolve(handle, "cublasDestroy_v2", a.destroy, l.problem);
    resolve(handle, "cublasSetStream_v2", a.set_stream, l.problem);
    resolve(handle, "cublasGetStream_v2", a.get_stream, l.problem);
    resolve(handle, "cublasSetWorkspace_v2", a.set_workspace, l.problem);
    resolve(handle, "cublasGemmEx", a.gemm_ex, l.problem);
    resolve(handle, "cublasGemmGroupedBatchedEx", a.gemm_grouped_batched_ex, l.problem);
    resolve(handle, "cublasGetStatusString", a.status_string, l.problem);
    return l;  // the library stays loaded for the process's life
  }();
  return library;
}

}  // namespace

const CublasLibrary* cublas_library() {
  const Loaded& l = loaded();
  return l.problem.empty() ? &l.api : nullptr;
}

std::string cublas_library_problem() { return loaded().problem; }

const char* cublas_soname() { return SY_CUBLAS_SONAME; }

const CublasLibrary& cublas() {
  const CublasLibrary* api = cublas_library();
  assert(api && "a cuBLAS handle exists only where the library loaded");
  return *api;
}

}  // namespace sy::kernels
