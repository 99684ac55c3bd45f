// bench_module_loading: what CUDA_MODULE_LOADING=EAGER (set for a rank under a launcher,
// docs/architecture.md "Lazy module loading and NCCL") costs next to CUDA's default, lazy: the
// same steps a cuda rank takes (context, an NCCL communicator, cuBLAS and a GEMM, our kernels
// preloaded), each in a fresh process per mode, with the time each step took and the device
// memory in use after it, side by side. A benchmark to read (runs only where a GPU is).
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/kernel_preload.h"

namespace {

constexpr int kSteps = 4;
const char* const kStepNames[kSteps] = {"CUDA context", "NCCL communicator (1 rank)", "cuBLAS handle + sgemm 512^3",
                                        "our kernels preloaded"};

double used_mib() {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) != cudaSuccess) return -1;
  return static_cast<double>(total - free) / (1 << 20);
}

// One process: each step's milliseconds and the MiB in use after it, on one line.
int child() {
  using clock = std::chrono::steady_clock;
  double ms[kSteps], mib[kSteps];
  auto t = clock::now();
  auto lap = [&](int i) {
    const auto now = clock::now();
    ms[i] = std::chrono::duration<double, std::milli>(now - t).count();
    mib[i] = used_mib();
    t = clock::now();
  };
  if (cudaSetDevice(0) != cudaSuccess || cudaFree(nullptr) != cudaSuccess) return 2;
  lap(0);
  ncclComm_t comm = nullptr;
  int dev = 0;
  if (ncclCommInitAll(&comm, 1, &dev) != ncclSuccess) return 3;
  lap(1);
  cublasHandle_t blas = nullptr;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) return 4;
  constexpr int n = 512;
  float *a = nullptr, *c = nullptr;
  if (cudaMalloc(&a, n * n * sizeof(float)) != cudaSuccess || cudaMalloc(&c, n * n * sizeof(float)) != cudaSuccess)
    return 5;
  const float one = 1, zero = 0;
  if (cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a, n, a, n, &zero, c, n) != CUBLAS_STATUS_SUCCESS ||
      cudaDeviceSynchronize() != cudaSuccess)
    return 6;
  lap(2);
  if (!sy::kernels::preload_kernels().ok()) return 7;
  lap(3);
  const auto lazy = sy::kernels::lazy_module_loading();
  std::printf("%s", lazy.ok() ? (*lazy ? "lazy" : "eager") : "unknown");
  for (int i = 0; i < kSteps; ++i) std::printf(" %.1f %.0f", ms[i], mib[i]);
  std::printf("\n");
  cublasDestroy(blas);
  ncclCommDestroy(comm);
  return 0;
}

struct Run {
  std::string mode;  // as the driver reports it
  double ms[kSteps] = {}, mib[kSteps] = {};
};

bool run(const std::string& self, const char* loading, Run& out) {
  const std::string command = "env CUDA_MODULE_LOADING=" + std::string(loading) + " " + self + " --child";
  FILE* p = popen(command.c_str(), "r");
  if (!p) return false;
  char mode[32] = {};
  int got = std::fscanf(p, "%31s", mode);
  for (int i = 0; i < kSteps && got == 1 + 2 * i; ++i) got += std::fscanf(p, "%lf %lf", &out.ms[i], &out.mib[i]);
  const int status = pclose(p);
  out.mode = mode;
  return status == 0 && got == 1 + 2 * kSteps;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--child") return child();
  if (!sy::kernels::cuda_device_available()) {
    std::fprintf(stderr, "bench_module_loading: no CUDA device: %s\n", sy::kernels::cuda_device_problem().c_str());
    return 1;
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  Run lazy, eager;
  if (!run(ec ? argv[0] : self.string(), "LAZY", lazy) || !run(ec ? argv[0] : self.string(), "EAGER", eager)) {
    std::fprintf(stderr, "bench_module_loading: a child process failed (its exit code says at which step: 2 context, "
                 "3 NCCL, 4-6 cuBLAS, 7 preload)\n");
    return 1;
  }
  std::printf("CUDA_MODULE_LOADING=LAZY (driver: %s) next to EAGER (driver: %s), one fresh process each;\n"
              "time of each step, and device memory in use after it (cudaMemGetInfo, the whole GPU)\n\n",
              lazy.mode.c_str(), eager.mode.c_str());
  std::printf("%-30s %10s %10s %8s   %10s %10s %10s\n", "step", "lazy ms", "eager ms", "ratio", "lazy MiB",
              "eager MiB", "+MiB");
  for (int i = 0; i < kSteps; ++i)
    std::printf("%-30s %10.1f %10.1f %7.2fx   %10.0f %10.0f %+10.0f\n", kStepNames[i], lazy.ms[i], eager.ms[i],
                lazy.ms[i] > 0 ? eager.ms[i] / lazy.ms[i] : 0.0, lazy.mib[i], eager.mib[i], eager.mib[i] - lazy.mib[i]);
  double lazy_ms = 0, eager_ms = 0;
  for (int i = 0; i < kSteps; ++i) lazy_ms += lazy.ms[i], eager_ms += eager.ms[i];
  std::printf("%-30s %10.1f %10.1f %7.2fx   %10.0f %10.0f %+10.0f\n", "total", lazy_ms, eager_ms,
              lazy_ms > 0 ? eager_ms / lazy_ms : 0.0, lazy.mib[kSteps - 1], eager.mib[kSteps - 1],
              eager.mib[kSteps - 1] - lazy.mib[kSteps - 1]);
  return 0;
}
