// cuBLAS is loaded on first use, not at start-up: a process linking the cuda backend starts
// without libcublas (and libcublasLt) mapped, and loads every entry point the kernels call when
// asked, with or without a GPU.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/cublas_library.h"

namespace sy {
namespace {

// Whether the library was mapped before main: RTLD_NOLOAD finds a library only if it is
// already loaded (and then takes a reference, dropped at once).
const bool g_loaded_at_start = [] {
  void* handle = dlopen(kernels::cublas_soname(), RTLD_NOW | RTLD_NOLOAD);
  if (handle) dlclose(handle);
  return handle != nullptr;
}();

TEST(CublasLibrary, NotLoadedBeforeMain) { EXPECT_FALSE(g_loaded_at_start) << kernels::cublas_soname(); }

TEST(CublasLibrary, LoadsEveryEntryPointOnFirstUse) {
  const kernels::CublasLibrary* api = kernels::cublas_library();
  ASSERT_NE(api, nullptr) << kernels::cublas_library_problem();
  EXPECT_EQ(kernels::cublas_library_problem(), "");
  for (const void* f : {reinterpret_cast<const void*>(api->create), reinterpret_cast<const void*>(api->destroy),
                        reinterpret_cast<const void*>(api->set_stream), reinterpret_cast<const void*>(api->get_stream),
                        reinterpret_cast<const void*>(api->set_workspace), reinterpret_cast<const void*>(api->gemm_ex),
                        reinterpret_cast<const void*>(api->gemm_grouped_batched_ex),
                        reinterpret_cast<const void*>(api->status_string)})
    EXPECT_NE(f, nullptr);
  // A call that needs no GPU goes through to the library: its text for a status.
  const std::string unsupported = api->status_string(CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_NE(unsupported, "");
  EXPECT_NE(unsupported, api->status_string(CUBLAS_STATUS_SUCCESS));
  void* handle = dlopen(kernels::cublas_soname(), RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(handle, nullptr);
  if (handle) dlclose(handle);
}

}  // namespace
}  // namespace sy
