// Throughput of the CPU kernels on the shapes of the `small` model preset, printed as one
// side-by-side table per run: our linear (f32 / bf16 / f16 weights) against OpenBLAS sgemm on
// the same shapes, then paged attention decode and prefill.
//
//   bench_kernels [--threads N] [--min-time SECONDS] [--quick]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/paged_attention.h"

namespace {

using sy::kernels::DType;
using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 0;
  double min_time = 0.3;
  bool quick = false;
};

// Median seconds per call of f after one warm-up call, sampling for at least min_time.
template <class F>
double time_call(F&& f, double min_time) {
  f();
  std::vector<double> samples;
  const auto start = Clock::now();
  do {
    const auto t0 = Clock::now();
    f();
    samples.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  } while ((std::chrono::duration<double>(Clock::now() - start).count() < min_time || samples.size() < 3) &&
           samples.size() < 2000);
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2), samples.end());
  return samples[samples.size() / 2];
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Several copies of one weight matrix, cycled through call by call: together they exceed the
// last-level cache, so every call streams W from memory as a decode step does (the weights of
// all other layers and experts pass through the cache in between).
struct WeightSet {
  DType dtype;
  std::int64_t rows, cols;
  std::vector<std::vector<std::uint8_t>> copies;
  std::size_t next = 0;

  WeightSet(const std::vector<float>& values, DType t, std::int64_t n, std::int64_t k, std::size_t count)
      : dtype(t), rows(n), cols(k) {
    std::vector<std::uint8_t> bytes(values.size() * sy::kernels::dtype_size(t));
    sy::kernels::convert_from_f32(values.data(), bytes.data(), t, values.size());
    copies.assign(count, bytes);
  }
  sy::kernels::WeightView take() {
    const auto& c = copies[next];
    next = (next + 1) % copies.size();
    return {c.data(), dtype, rows, cols};
  }
};

struct Shape {
  const char* name;
  std::int64_t N, K;
};

void bench_linear(const Options& opt) {
  // The small preset: hidden 1024, expert intermediate 1792, vocabulary 32000.
  const Shape shapes[] = {{"expert gate/up", 1792, 1024}, {"expert down", 1024, 1792}, {"lm_head", 32000, 1024}};
  const std::int64_t Ms[] = {1, 8, 64, 512};
  constexpr std::size_t kColdBytes = std::size_t{96} << 20;  // 3× this machine's 32 MiB L3

  std::printf("GEMM y[M,N] = x[M,K]·W[N,K]^T, GFLOP/s (2·M·N·K / median time), weights cycled through %zu MiB\n",
              kColdBytes >> 20);
  std::printf("%-15s %6s %5s %5s | %9s | %9s %6s | %9s %6s | %9s %6s | %9s\n", "shape", "N", "K", "M",
              "sgemm f32", "lin f32", "ratio", "lin bf16", "ratio", "lin f16", "ratio", "bf16 GB/s");
  for (const Shape& s : shapes) {
    const std::vector<float> w = random_floats(static_cast<std::size_t>(s.N * s.K), 1);
    const std::size_t f32_bytes = w.size() * 4;
    const std::size_t copies = std::max<std::size_t>(1, (kColdBytes + f32_bytes - 1) / f32_bytes);
    WeightSet f32(w, DType::F32, s.N, s.K, copies);
    WeightSet bf16(w, DType::BF16, s.N, s.K, copies);
    WeightSet f16(w, DType::F16, s.N, s.K, copies);
    for (const std::int64_t M : Ms) {
      if (opt.quick && M * s.N * s.K > (std::int64_t{1} << 32)) continue;
      const std::vector<float> x = random_floats(static_cast<std::size_t>(M * s.K), 2);
      std::vector<float> y(static_cast<std::size_t>(M * s.N));
      const double flops = 2.0 * static_cast<double>(M * s.N * s.K);
      const double t_blas = time_call(
          [&] {
            const auto v = f32.take();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(M), static_cast<int>(s.N),
                        static_cast<int>(s.K), 1.0f, x.data(), static_cast<int>(s.K), static_cast<const float*>(v.data),
                        static_cast<int>(s.K), 0.0f, y.data(), static_cast<int>(s.N));
          },
          opt.min_time);
      auto ours = [&](WeightSet& set) {
        return time_call([&] { sy::kernels::linear(x.data(), M, set.take(), nullptr, y.data()); }, opt.min_time);
      };
      const double t_f32 = ours(f32);
      const double t_bf16 = ours(bf16);
      const double t_f16 = ours(f16);
      std::printf("%-15s %6lld %5lld %5lld | %9.1f | %9.1f %5.2fx | %9.1f %5.2fx | %9.1f %5.2fx | %9.1f\n", s.name,
                  static_cast<long long>(s.N), static_cast<long long>(s.K), static_cast<long long>(M),
                  flops / t_blas * 1e-9, flops / t_f32 * 1e-9, t_blas / t_f32, flops / t_bf16 * 1e-9, t_blas / t_bf16,
                  flops / t_f16 * 1e-9, t_blas / t_f16, static_cast<double>(s.N * s.K * 2) / t_bf16 * 1e-9);
      std::fflush(stdout);
    }
  }
  std::printf("ratio = sgemm time / our time (>1: faster than OpenBLAS sgemm on f32 weights)\n\n");
}

void bench_attention(const Options& opt) {
  // The small preset's attention: 16 query heads, 4 KV heads, head_dim 64; 16 positions a page.
  const std::int32_t heads = 16, kv_heads = 4, dim = 64, page = 16;
  const std::int32_t max_ctx = 1024;
  const std::int32_t pages = max_ctx / page;
  const std::size_t width = static_cast<std::size_t>(kv_heads) * dim;
  std::vector<float> k_pool = random_floats(static_cast<std::size_t>(pages * page) * width, 3);
  std::vector<float> v_pool = random_floats(k_pool.size(), 4);
  std::vector<std::int32_t> table(static_cast<std::size_t>(pages));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937_64(5));  // scattered pages, as in serving
  const sy::kernels::KvLayerView view{k_pool.data(), v_pool.data(), pages, page, kv_heads, dim};
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));

  std::printf("Paged attention, %d heads / %d KV heads, head_dim %d, page %d, one sequence\n", heads, kv_heads, dim, page);
  std::printf("%-8s %8s %8s | %10s | %10s | %12s\n", "phase", "queries", "context", "time", "GFLOP/s", "KV read GB/s");
  for (const std::int32_t ctx : {512, 1024}) {
    const std::vector<float> q = random_floats(static_cast<std::size_t>(heads) * dim, 6);
    std::vector<float> out(q.size());
    const std::int32_t pos = ctx - 1;
    const double t = time_call(
        [&] { sy::kernels::paged_attention(q.data(), 1, heads, &pos, view, table.data(), scale, out.data()); },
        opt.min_time);
    const double flops = 4.0 * heads * dim * ctx;
    const double bytes = 2.0 * ctx * static_cast<double>(width) * 4;
    std::printf("%-8s %8d %8d | %7.1f us | %10.2f | %12.2f\n", "decode", 1, ctx, t * 1e6, flops / t * 1e-9, bytes / t * 1e-9);
  }
  for (const std::int32_t T : {128, 512, 1024}) {
    const std::vector<float> q = random_floats(static_cast<std::size_t>(T) * heads * dim, 7);
    std::vector<float> out(q.size());
    std::vector<std::int32_t> pos(static_cast<std::size_t>(T));
    std::iota(pos.begin(), pos.end(), 0);
    const double t = time_call(
        [&] { sy::kernels::paged_attention(q.data(), T, heads, pos.data(), view, table.data(), scale, out.data()); },
        opt.min_time);
    // QK and PV over the causal triangle: 2 · 2 · heads · dim · T(T+1)/2.
    const double flops = 2.0 * heads * dim * static_cast<double>(T) * (T + 1);
    std::printf("%-8s %8d %8d | %7.2f ms | %10.2f | %12s\n", "prefill", T, T, t * 1e3, flops / t * 1e-9, "-");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      opt.threads = std::atoi(argv[++i]);
    } else if (a == "--min-time" && i + 1 < argc) {
      opt.min_time = std::atof(argv[++i]);
    } else if (a == "--quick") {
      opt.quick = true;
      opt.min_time = 0.05;
    } else {
      std::fprintf(stderr, "usage: %s [--threads N] [--min-time SECONDS] [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (opt.threads > 0) sy::kernels::set_num_threads(opt.threads);
  else sy::kernels::set_num_threads(sy::kernels::num_threads());  // one count for OpenBLAS and OpenMP
  std::printf("threads: %d\n\n", sy::kernels::num_threads());
  bench_linear(opt);
  bench_attention(opt);
  return 0;
}
