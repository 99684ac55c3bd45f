// The CUDA kernels against the CPU kernels on the same inputs. Every test that needs a GPU
// skips itself where cuda_device_available() is false, so the suite passes on build machines
// and checks for real on GPU machines.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <map>
#include <tuple>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cuda/penalty_entries.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/router.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/grouped_small_m.h"
#include "kernels/cuda/grouped_tensor_core.h"
#include "kernels/cuda/small_m_plan.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!kernels::cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << kernels::cuda_device_problem()

// A kernel launcher's status must be ok; the message names the kernel and the CUDA error.
#define ASSERT_OK(expr)                                  \
  do {                                                   \
    const ::sy::Status sy_status_ = (expr);              \
    ASSERT_TRUE(sy_status_.ok()) << sy_status_.message(); \
  } while (0)

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

// A device copy of a host vector, copied back on demand.
template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) { check(cudaMalloc(&p_, std::max<std::size_t>(1, n) * sizeof(T)), "cudaMalloc"); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) {
    check(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(p_); }
  T* get() const { return static_cast<T*>(p_); }
  std::vector<T> host() const {
    check(cudaDeviceSynchronize(), "kernel execution");
    std::vector<T> out(n_);
    check(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return out;
  }

 private:
  void* p_ = nullptr;
  std::size_t n_;
};

// The CPU result as the reference (double, for nmse).
std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(CudaProbe, AnswersWithoutThrowing) {
  const bool available = kernels::cuda_device_available();
  int count = 0;
  const bool runtime_says = cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
  cudaGetLastError();
  EXPECT_EQ(available, runtime_says);
}

TEST(CudaProbe, NcclIsLinked) {
  // ncclGetVersion needs no GPU: this runs everywhere the CUDA library is built.
  const auto v = kernels::nccl_version();
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_GE(*v, 2000) << "NCCL 2.x version codes are at least 2000";
}

TEST(CudaKernels, RmsNormMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const DType t : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_label(t));
    Rng rng(1);
    const std::int64_t rows = 7, dim = 1000;
    const TestWeight w = make_weight(rng, t, 1, dim, 2.0f);
    const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(rows * dim), -3.0f, 3.0f);
    std::vector<float> expected(x.size());
    kernels::rmsnorm(x.data(), w.bytes.data(), t, 1e-6f, rows, dim, expected.data());
    DeviceBuffer<float> dx(x), dy(x.size());
    DeviceBuffer<std::uint8_t> dw(w.bytes);
    ASSERT_OK(kernels::rmsnorm_cuda(dx.get(), dw.get(), t, 1e-6f, rows, dim, dy.get(), nullptr));
    EXPECT_LT(nmse(dy.host(), as_double(expected)), 1e-12);
    ASSERT_OK(kernels::rmsnorm_cuda(dx.get(), dw.get(), t, 1e-6f, rows, dim, dx.get(), nullptr));  // in place
    EXPECT_LT(nmse(dx.host(), as_double(expected)), 1e-12);
  }
}

TEST(CudaKernels, RopeMatchesCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(2);
  const std::int32_t dim = 128, heads = 6;
  const std::vector<std::int32_t> pos = {0, 1, 7, 300, 4095, 100003};
  const auto tokens = static_cast<std::int64_t>(pos.size());
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(tokens * heads * dim));
  // Plain RoPE, and a yarn-like one: other frequencies and cos/sin scaled by 1.1386.
  std::vector<float> scaled_freq = kernels::Rope(dim, 1e6).inv_freq();
  for (std::size_t i = scaled_freq.size() / 2; i < scaled_freq.size(); ++i) scaled_freq[i] /= 4.0f;
  for (const kernels::Rope& rope : {kernels::Rope(dim, 1e6), kernels::Rope(dim, scaled_freq, 1.1386294f)}) {
    SCOPED_TRACE("attention_scaling " + std::to_string(rope.attention_scaling()));
    std::vector<float> expected = x;
    rope.apply(expected.data(), tokens, heads, pos.data());
    DeviceBuffer<float> dx(x), dfreq(rope.inv_freq());
    DeviceBuffer<std::int32_t> dpos(pos);
    ASSERT_OK(kernels::rope_cuda(dx.get(), tokens, heads, dim, dfreq.get(), dpos.get(), rope.attention_scaling(), nullptr));
    // Same float32 angles; CUDA's sincosf and glibc's may differ by an ulp or two.
    EXPECT_LT(nmse(dx.host(), as_double(expected)), 1e-12);
  }
}

TEST(CudaKernels, PagedAttentionDecodeMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [heads, kv_heads, dim] : {std::tuple{16, 4, 64}, std::tuple{8, 8, 128}, std::tuple{6, 1, 40}}) {
    SCOPED_TRACE("heads " + std::to_string(heads) + " kv " + std::to_string(kv_heads) + " dim " + std::to_string(dim));
    Rng rng(static_cast<std::uint64_t>(heads * 31 + dim));
    const std::int32_t page = 16, pages = 64, max_pages_per_seq = 20;
    const std::vector<std::int32_t> lengths = {1, 17, 100, 300};
    const auto n_seqs = static_cast<std::int32_t>(lengths.size());
    const std::size_t width = static_cast<std::size_t>(kv_heads) * dim;
    std::vector<float> k_pool(static_cast<std::size_t>(pages * page) * width, 0.0f), v_pool = k_pool;
    const kernels::KvLayerView host_view{k_pool.data(), v_pool.data(), pages, page, kv_heads, dim};
    // Disjoint, shuffled pages for the sequences.
    std::vector<std::int32_t> ids(static_cast<std::size_t>(pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng.engine());
    std::vector<std::int32_t> tables(static_cast<std::size_t>(n_seqs * max_pages_per_seq), -1);
    std::size_t next = 0;
    std::vector<std::int32_t> positions;
    for (std::int32_t s = 0; s < n_seqs; ++s) {
      const std::int32_t len = lengths[static_cast<std::size_t>(s)];
      for (std::int32_t p = 0; p < (len + page - 1) / page; ++p) tables[static_cast<std::size_t>(s * max_pages_per_seq + p)] = ids[next++];
      const std::vector<float> k = rng.uniform_vector(len * width, -2.0f, 2.0f), v = rng.uniform_vector(len * width);
      kernels::kv_cache_write(host_view, tables.data() + s * max_pages_per_seq, 0, len, k.data(), v.data());
      positions.push_back(len - 1);
    }
    const std::size_t q_width = static_cast<std::size_t>(heads) * dim;
    const std::vector<float> q = rng.uniform_vector(n_seqs * q_width, -2.0f, 2.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
    std::vector<float> expected(q.size());
    for (std::int32_t s = 0; s < n_seqs; ++s)
      kernels::paged_attention(q.data() + s * q_width, 1, heads, &positions[static_cast<std::size_t>(s)], host_view,
                               tables.data() + s * max_pages_per_seq, scale, expected.data() + s * q_width);

    DeviceBuffer<float> dk(k_pool), dv(v_pool), dq(q), dout(q.size());
    DeviceBuffer<std::int32_t> dtables(tables), dpos(positions);
    const kernels::KvLayerView device_view{dk.get(), dv.get(), pages, page, kv_heads, dim};
    ASSERT_OK(kernels::paged_attention_decode_cuda(dq.get(), n_seqs, heads, dpos.get(), device_view, dtables.get(),
                                         max_pages_per_seq, scale, dout.get(), nullptr));
    EXPECT_LT(nmse(dout.host(), as_double(expected)), 1e-10);
  }
}

TEST(CudaKernels, SiluMulMatchesCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(4);
  const std::size_t n = 100003;
  const std::vector<float> g = rng.uniform_vector(n, -20.0f, 20.0f), u = rng.uniform_vector(n);
  std::vector<float> expected(n);
  kernels::silu_mul(g.data(), u.data(), expected.data(), static_cast<std::int64_t>(n));
  DeviceBuffer<float> dg(g), du(u), dh(n);
  ASSERT_OK(kernels::silu_mul_cuda(dg.get(), du.get(), dh.get(), static_cast<std::int64_t>(n), nullptr));
  EXPECT_LT(nmse(dh.host(), as_double(expected)), 1e-12);
}

TEST(CudaKernels, ScaleRowsMatchesCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  Rng rng(41);
  const std::int64_t rows = 37, width = 1000;
  const std::vector<float> y = rng.uniform_vector(static_cast<std::size_t>(rows * width)),
                           scale = rng.uniform_vector(static_cast<std::size_t>(rows), 0.1f, 2.0f);
  std::vector<float> expected = y;
  for (std::int64_t i = 0; i < rows * width; ++i)
    expected[static_cast<std::size_t>(i)] *= scale[static_cast<std::size_t>(i / width)];
  DeviceBuffer<float> dy(y), ds(scale);
  ASSERT_OK(kernels::scale_rows_cuda(dy.get(), ds.get(), rows, width, nullptr));
  EXPECT_EQ(dy.host(), expected);
}

TEST(CudaKernels, RouterTopkMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const std::int32_t E : {8, 60, 128, 256}) {
    for (const std::int32_t k : {1, 2, 8}) {
      for (const bool renorm : {false, true}) {
        SCOPED_TRACE("E=" + std::to_string(E) + " k=" + std::to_string(k) + (renorm ? " renorm" : ""));
        Rng rng(static_cast<std::uint64_t>(E * 10 + k));
        const std::int64_t tokens = 37;
        std::vector<float> logits = rng.uniform_vector(static_cast<std::size_t>(tokens * E), -4.0f, 4.0f);
        logits[3] = logits[5] = 10.0f;  // a tie at the top of token 0
        std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * k));
        std::vector<float> w(ids.size());
        kernels::router_topk(logits.data(), tokens, E, k, renorm, ids.data(), w.data());
        DeviceBuffer<float> dlogits(logits), dw(w.size());
        DeviceBuffer<std::int32_t> dids(ids.size());
        ASSERT_OK(kernels::router_topk_cuda(dlogits.get(), tokens, E, k, renorm, dids.get(), dw.get(), nullptr));
        EXPECT_EQ(dids.host(), ids);
        EXPECT_LT(nmse(dw.host(), as_double(w)), 1e-12);
      }
    }
  }
}

// A NaN or infinite logit makes a softmax row NaN: the CPU kernel then takes experts 0..k-1
// (its strict > never fires), and the GPU must name the same valid experts, never an id
// outside 0..E-1 that the runtime would index with.
TEST(CudaKernels, RouterTopkOnNanRowsPicksTheCpusExperts) {
  SKIP_WITHOUT_GPU();
  for (const std::int32_t E : {8, 60, 128}) {
    SCOPED_TRACE("E=" + std::to_string(E));
    const std::int32_t k = 8 < E ? 8 : E / 2;
    const std::int64_t tokens = 5;
    Rng rng(static_cast<std::uint64_t>(E));
    std::vector<float> logits = rng.uniform_vector(static_cast<std::size_t>(tokens * E), -4.0f, 4.0f);
    logits[static_cast<std::size_t>(1 * E + E / 2)] = NAN;        // token 1: one NaN logit
    logits[static_cast<std::size_t>(2 * E + 3)] = INFINITY;       // token 2: +inf (inf - inf = NaN)
    for (std::int32_t e = 0; e < E; ++e) logits[static_cast<std::size_t>(3 * E + e)] = -INFINITY;  // token 3
    std::vector<std::int32_t> ids(static_cast<std::size_t>(tokens * k));
    std::vector<float> w(ids.size());
    kernels::router_topk(logits.data(), tokens, E, k, true, ids.data(), w.data());
    ASSERT_EQ(ids[static_cast<std::size_t>(k)], 0) << "the CPU kernel takes the lowest ids on a NaN row";
    DeviceBuffer<float> dlogits(logits), dw(w.size());
    DeviceBuffer<std::int32_t> dids(ids.size());
    ASSERT_OK(kernels::router_topk_cuda(dlogits.get(), tokens, E, k, true, dids.get(), dw.get(), nullptr));
    EXPECT_EQ(dids.host(), ids);
    const std::vector<float> got = dw.host();
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(std::isnan(got[i]) == std::isnan(w[i]) && (std::isnan(w[i]) || std::abs(got[i] - w[i]) < 1e-6f))
          << "weight " << i << ": " << got[i] << " vs " << w[i];
  }
}

TEST(CudaKernels, ArgmaxMatchesCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(5);
  const std::int32_t vocab = 32000;
  const std::int64_t rows = 5;
  std::vector<float> logits = rng.uniform_vector(static_cast<std::size_t>(rows * vocab), -10.0f, 10.0f);
  logits[100] = logits[20000] = 50.0f;                       // row 0: tie, first wins
  logits[vocab + 31999] = 60.0f;                             // row 1: the last element
  logits[2 * vocab + 7] = NAN;                               // row 2: NaN wins
  logits[2 * vocab + 9] = 99.0f;
  std::vector<std::int32_t> expected;
  for (std::int64_t r = 0; r < rows; ++r) expected.push_back(kernels::argmax(logits.data() + r * vocab, vocab));
  ASSERT_EQ(expected[0], 100);
  DeviceBuffer<float> dlogits(logits);
  DeviceBuffer<std::int32_t> dout(static_cast<std::size_t>(rows));
  ASSERT_OK(kernels::argmax_cuda(dlogits.get(), rows, vocab, dout.get(), nullptr));
  EXPECT_EQ(dout.host(), expected);
}

TEST(CudaKernels, Bf16ConversionMatchesCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  Rng rng(6);
  std::vector<float> x = rng.uniform_vector(1001, -1e4f, 1e4f);
  x[0] = NAN;
  x[1] = INFINITY;
  x[2] = std::bit_cast<float>(0x3f808000u);  // a rounding tie
  std::vector<std::uint16_t> expected(x.size());
  kernels::convert_from_f32(x.data(), expected.data(), DType::BF16, x.size());
  DeviceBuffer<float> dx(x);
  DeviceBuffer<std::uint16_t> dh(x.size());
  ASSERT_OK(kernels::f32_to_bf16_cuda(dx.get(), dh.get(), static_cast<std::int64_t>(x.size()), nullptr));
  EXPECT_EQ(dh.host(), expected);
}

TEST(CudaKernels, LinearBf16MatchesCpu) {
  SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  for (const auto& [M, N, K] : {std::tuple{1, 1792, 1024}, std::tuple{8, 33, 67}, std::tuple{64, 1024, 1792}}) {
    for (const bool with_bias : {false, true})
      for (const bool accumulate : {false, true}) {
        SCOPED_TRACE("M" + std::to_string(M) + " N" + std::to_string(N) + " K" + std::to_string(K) +
                     (with_bias ? " bias" : "") + (accumulate ? " accumulate" : ""));
        Rng rng(static_cast<std::uint64_t>(M + N + K));
        const TestWeight w = make_weight(rng, DType::BF16, N, K);
        // The GPU sees bf16 activations; give the CPU the same (rounded) values.
        std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(M * K));
        std::vector<std::uint16_t> x16(x.size());
        kernels::convert_from_f32(x.data(), x16.data(), DType::BF16, x.size());
        kernels::convert_to_f32(x16.data(), DType::BF16, x.data(), x.size());
        const std::vector<float> bias = rng.uniform_vector(static_cast<std::size_t>(N));
        const std::vector<float> y0 = rng.uniform_vector(static_cast<std::size_t>(M * N));
        std::vector<float> expected = y0;
        kernels::linear(x.data(), M, w.view(), with_bias ? bias.data() : nullptr, expected.data(), accumulate);
        DeviceBuffer<std::uint16_t> dx(x16);
        DeviceBuffer<std::uint8_t> dw(w.bytes);
        DeviceBuffer<float> dbias(bias), dy(y0);
        ASSERT_OK(kernels::linear_bf16_cuda(handle, dx.get(), M, reinterpret_cast<const std::uint16_t*>(dw.get()), N, K,
                                  with_bias ? dbias.get() : nullptr, dy.get(), accumulate, nullptr));
        EXPECT_LT(nmse(dy.host(), as_double(expected)), 1e-10);
      }
  }
  cublasDestroy(handle);
}

TEST(CudaKernels, EmbeddingMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const DType t : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_label(t));
    Rng rng(11);
    const std::int64_t vocab = 1000, H = 333;
    const TestWeight table = make_weight(rng, t, vocab, H);
    const std::vector<std::int32_t> tokens = {0, 999, 5, 5, 123};
    const auto n = static_cast<std::int64_t>(tokens.size());
    std::vector<float> expected(static_cast<std::size_t>(n * H));
    for (std::int64_t i = 0; i < n; ++i)  // ModelOps::embed
      kernels::convert_to_f32(table.view().row(tokens[static_cast<std::size_t>(i)]), t, expected.data() + i * H,
                              static_cast<std::size_t>(H));
    DeviceBuffer<std::uint8_t> dt(table.bytes);
    DeviceBuffer<std::int32_t> dtok(tokens);
    DeviceBuffer<float> dout(expected.size());
    ASSERT_OK(kernels::embedding_cuda(dt.get(), t, vocab, H, dtok.get(), n, dout.get(), nullptr));
    EXPECT_EQ(dout.host(), expected);
  }
}

// A paged layer, its host and device copies, and block tables for a few sequences.
struct PagedFixture {
  std::int32_t pages = 96, page = 16, kv_heads, dim, table_stride = 24;
  std::vector<float> k_pool, v_pool;
  std::vector<std::int32_t> tables;
  PagedFixture(Rng& rng, std::int32_t kv, std::int32_t d, std::int32_t n_seqs) : kv_heads(kv), dim(d) {
    const std::size_t width = static_cast<std::size_t>(kv) * d;
    k_pool.assign(static_cast<std::size_t>(pages * page) * width, 0.0f);
    v_pool = k_pool;
    std::vector<std::int32_t> ids(static_cast<std::size_t>(pages));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng.engine());
    tables.assign(static_cast<std::size_t>(n_seqs * table_stride), -1);
    std::size_t next = 0;
    for (std::int32_t s = 0; s < n_seqs; ++s)
      for (std::int32_t p = 0; p < pages / n_seqs && p < table_stride; ++p)
        tables[static_cast<std::size_t>(s * table_stride + p)] = ids[next++];
  }
  kernels::KvLayerView host_view() { return {k_pool.data(), v_pool.data(), pages, page, kv_heads, dim}; }
  const std::int32_t* table(std::int32_t s) const { return tables.data() + s * table_stride; }
};

TEST(CudaKernels, KvCacheWriteMatchesCpu) {
  SKIP_WITHOUT_GPU();
  Rng rng(12);
  PagedFixture f(rng, 4, 64, 3);
  const std::size_t width = static_cast<std::size_t>(f.kv_heads) * f.dim;
  // A mixed batch: a 40-token prefill chunk from position 10, a decode at 77, a chunk of 3 from 0.
  const std::vector<std::tuple<std::int32_t, std::int32_t, std::int32_t>> parts = {{0, 10, 40}, {1, 77, 1}, {2, 0, 3}};
  std::vector<std::int32_t> token_seq, positions;
  for (const auto& [s, p0, n] : parts)
    for (std::int32_t i = 0; i < n; ++i) {
      token_seq.push_back(s);
      positions.push_back(p0 + i);
    }
  const std::vector<float> k = rng.uniform_vector(positions.size() * width), v = rng.uniform_vector(positions.size() * width);
  DeviceBuffer<float> dk_pool(f.k_pool), dv_pool(f.v_pool), dk(k), dv(v);
  std::size_t row = 0;
  for (const auto& [s, p0, n] : parts) {
    kernels::kv_cache_write(f.host_view(), f.table(s), p0, n, k.data() + row * width, v.data() + row * width);
    row += static_cast<std::size_t>(n);
  }
  DeviceBuffer<std::int32_t> dtables(f.tables), dseq(token_seq), dpos(positions);
  const kernels::KvLayerView dview{dk_pool.get(), dv_pool.get(), f.pages, f.page, f.kv_heads, f.dim};
  ASSERT_OK(kernels::kv_cache_write_cuda(dview, dtables.get(), f.table_stride, dseq.get(), dpos.get(),
                                         static_cast<std::int64_t>(positions.size()), dk.get(), dv.get(), nullptr));
  EXPECT_EQ(dk_pool.host(), f.k_pool);
  EXPECT_EQ(dv_pool.host(), f.v_pool);
}

// Which attention kernel a case runs: paged_attention_prefill_cuda, paged_attention_split_cuda
// or paged_attention_gqa_cuda.
enum class AttentionKernel { Prefill, Split, Gqa };

// Sequences `parts` (sequence, first position, rows) with their caches filled up to each
// chunk's end, attended by `kernel` on the GPU and by paged_attention on the cpu.
void expect_attention_matches_cpu(AttentionKernel kernel, std::int32_t heads, std::int32_t kv_heads, std::int32_t dim,
                                  const std::vector<std::tuple<std::int32_t, std::int32_t, std::int32_t>>& parts) {
  Rng rng(static_cast<std::uint64_t>(heads * 7 + dim + parts.size()));
  PagedFixture f(rng, kv_heads, dim, 3);
  const std::size_t width = static_cast<std::size_t>(kv_heads) * dim;
  const std::size_t q_width = static_cast<std::size_t>(heads) * dim;
  std::vector<std::int32_t> token_seq, positions;
  for (const auto& [s, p0, n] : parts) {
    const std::int32_t len = p0 + n;  // the cache holds everything up to the chunk's end
    const std::vector<float> k = rng.uniform_vector(static_cast<std::size_t>(len) * width, -2.0f, 2.0f);
    const std::vector<float> v = rng.uniform_vector(static_cast<std::size_t>(len) * width);
    kernels::kv_cache_write(f.host_view(), f.table(s), 0, len, k.data(), v.data());
    for (std::int32_t i = 0; i < n; ++i) {
      token_seq.push_back(s);
      positions.push_back(p0 + i);
    }
  }
  const std::vector<float> q = rng.uniform_vector(positions.size() * q_width, -2.0f, 2.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  std::vector<float> expected(q.size());
  std::size_t row = 0;
  for (const auto& [s, p0, n] : parts) {
    kernels::paged_attention(q.data() + row * q_width, n, heads, positions.data() + row, f.host_view(), f.table(s),
                             scale, expected.data() + row * q_width);
    row += static_cast<std::size_t>(n);
  }
  const auto rows = static_cast<std::int64_t>(positions.size());
  DeviceBuffer<float> dk(f.k_pool), dv(f.v_pool), dq(q), dout(std::vector<float>(q.size(), NAN));
  const std::int64_t partial_floats = kernel == AttentionKernel::Gqa
                                          ? kernels::attention_gqa_floats(rows, heads, kv_heads, dim)
                                          : kernels::attention_split_floats(rows, heads, dim);
  DeviceBuffer<float> dpartials(std::vector<float>(static_cast<std::size_t>(std::max<std::int64_t>(1, partial_floats)), NAN));
  DeviceBuffer<std::int32_t> dtables(f.tables), dseq(token_seq), dpos(positions);
  const kernels::KvLayerView dview{dk.get(), dv.get(), f.pages, f.page, kv_heads, dim};
  if (kernel == AttentionKernel::Prefill) {
    ASSERT_OK(kernels::paged_attention_prefill_cuda(dq.get(), rows, heads, dseq.get(), dpos.get(), dview,
                                                    dtables.get(), f.table_stride, scale, dout.get(), nullptr));
  } else if (kernel == AttentionKernel::Split) {
    ASSERT_OK(kernels::paged_attention_split_cuda(dq.get(), rows, heads, dseq.get(), dpos.get(), dview, dtables.get(),
                                                  f.table_stride, scale, dpartials.get(), dout.get(), nullptr));
  } else {
    ASSERT_OK(kernels::paged_attention_gqa_cuda(dq.get(), rows, heads, dseq.get(), dpos.get(), dview, dtables.get(),
                                                f.table_stride, scale, dpartials.get(), dout.get(), nullptr));
  }
  EXPECT_LT(nmse(dout.host(), as_double(expected)), 1e-10);
}

// (heads, kv heads, head_dim): GQA groups of 4 and 8, MHA, head_dim 256 and an odd 40.
constexpr std::tuple<std::int32_t, std::int32_t, std::int32_t> kAttentionShapes[] = {
    {16, 4, 64}, {32, 4, 128}, {8, 8, 256}, {16, 2, 256}, {6, 1, 40}};

TEST(CudaKernels, PrefillAttentionMatchesCpu) {
  SKIP_WITHOUT_GPU();
  for (const auto& [heads, kv_heads, dim] : kAttentionShapes) {
    SCOPED_TRACE("heads " + std::to_string(heads) + " kv " + std::to_string(kv_heads) + " dim " + std::to_string(dim));
    // Sequence 0: a first chunk of 100 tokens; 1: a second chunk of 37 after 200 cached; 2: a decode at 300.
    expect_attention_matches_cpu(AttentionKernel::Prefill, heads, kv_heads, dim, {{0, 0, 100}, {1, 200, 37}, {2, 300, 1}});
  }
}

// The split kernel on the prefill test's mixed batch (enough blocks: one split) and on decode
// batches that split each row's keys: one row of 301 keys, and three rows of 1, 6 and 384
// keys (most of the first row's splits see no key, the last row's every split does).
TEST(CudaKernels, SplitAttentionMatchesCpu) {
  SKIP_WITHOUT_GPU();
  EXPECT_EQ(kernels::attention_splits(1, 32), 16);
  EXPECT_EQ(kernels::attention_splits(3, 16), 11);
  EXPECT_EQ(kernels::attention_splits(16, 32), 1);
  EXPECT_EQ(kernels::attention_split_floats(16, 32, 128), 0);
  EXPECT_EQ(kernels::attention_split_floats(1, 32, 128), 32 * 16 * 130);
  for (const auto& [heads, kv_heads, dim] : kAttentionShapes) {
    SCOPED_TRACE("heads " + std::to_string(heads) + " kv " + std::to_string(kv_heads) + " dim " + std::to_string(dim));
    expect_attention_matches_cpu(AttentionKernel::Split, heads, kv_heads, dim, {{0, 0, 100}, {1, 200, 37}, {2, 300, 1}});
    expect_attention_matches_cpu(AttentionKernel::Split, heads, kv_heads, dim, {{2, 300, 1}});
    expect_attention_matches_cpu(AttentionKernel::Split, heads, kv_heads, dim, {{0, 0, 1}, {1, 5, 1}, {2, 383, 1}});
    // A chunked prefill small enough to split: rows of one sequence with different key counts.
    expect_attention_matches_cpu(AttentionKernel::Split, heads, kv_heads, dim, {{0, 0, 3}, {1, 200, 2}});
  }
}

// Which shapes the grouped kernel takes and how many partials it needs: host code, no GPU.
TEST(AttentionGqa, TakesGroupsOf2To16WithinItsSharedMemory) {
  EXPECT_TRUE(kernels::attention_gqa_supported(32, 4, 128));   // qwen3_moe: 8 per KV head
  EXPECT_TRUE(kernels::attention_gqa_supported(32, 8, 128));   // mixtral: 4
  EXPECT_TRUE(kernels::attention_gqa_supported(16, 2, 256));   // 8 × 256 = 2048
  EXPECT_TRUE(kernels::attention_gqa_supported(32, 2, 128));   // 16
  EXPECT_FALSE(kernels::attention_gqa_supported(16, 16, 128));  // MHA: the split kernel's
  EXPECT_FALSE(kernels::attention_gqa_supported(6, 1, 40));     // 6 per KV head
  EXPECT_FALSE(kernels::attention_gqa_supported(32, 2, 256));   // 16 × 256 outputs
  EXPECT_FALSE(kernels::attention_gqa_supported(8, 0, 128));
  // One row over 4 KV heads: 4 blocks, so 16 splits (the cap); 128 rows × 4 = 512 blocks: none.
  EXPECT_EQ(kernels::attention_gqa_floats(1, 32, 4, 128), 32 * 16 * 130);
  EXPECT_EQ(kernels::attention_gqa_floats(128, 32, 4, 128), 0);
}

// The grouped kernel on the split test's batches, for every shape it takes, and groups of 2
// (64 pairs of a tile: two warps score, two wait) and 16 (8 keys a tile).
TEST(CudaKernels, GqaAttentionMatchesCpu) {
  SKIP_WITHOUT_GPU();
  std::vector<std::tuple<std::int32_t, std::int32_t, std::int32_t>> shapes = {{4, 2, 40}, {32, 2, 128}};
  for (const auto& shape : kAttentionShapes)
    if (kernels::attention_gqa_supported(std::get<0>(shape), std::get<1>(shape), std::get<2>(shape)))
      shapes.push_back(shape);
  ASSERT_EQ(shapes.size(), 5u);
  for (const auto& [heads, kv_heads, dim] : shapes) {
    SCOPED_TRACE("heads " + std::to_string(heads) + " kv " + std::to_string(kv_heads) + " dim " + std::to_string(dim));
    expect_attention_matches_cpu(AttentionKernel::Gqa, heads, kv_heads, dim, {{0, 0, 100}, {1, 200, 37}, {2, 300, 1}});
    expect_attention_matches_cpu(AttentionKernel::Gqa, heads, kv_heads, dim, {{2, 300, 1}});
    expect_attention_matches_cpu(AttentionKernel::Gqa, heads, kv_heads, dim, {{0, 0, 1}, {1, 5, 1}, {2, 383, 1}});
    expect_attention_matches_cpu(AttentionKernel::Gqa, heads, kv_heads, dim, {{0, 0, 3}, {1, 200, 2}});
  }
}

TEST(CudaKernels, QkNormIsPerHeadRmsNorm) {
  SKIP_WITHOUT_GPU();
  // Qwen3's q/k norm: rmsnorm over each head (rows = tokens · heads, dim = head_dim), in place.
  Rng rng(13);
  const std::int64_t tokens = 9, heads = 32, dim = 128;
  const TestWeight w = make_weight(rng, DType::BF16, 1, dim, 2.0f);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(tokens * heads * dim), -3.0f, 3.0f);
  std::vector<float> expected = x;
  kernels::rmsnorm(expected.data(), w.bytes.data(), DType::BF16, 1e-6f, tokens * heads, dim, expected.data());
  DeviceBuffer<float> dx(x);
  DeviceBuffer<std::uint8_t> dw(w.bytes);
  ASSERT_OK(kernels::rmsnorm_cuda(dx.get(), dw.get(), DType::BF16, 1e-6f, tokens * heads, dim, dx.get(), nullptr));
  EXPECT_LT(nmse(dx.host(), as_double(expected)), 1e-12);
}

// x rounded through `t` and back: what a GEMM over activations converted to t sees.
std::vector<float> rounded(std::vector<float> x, DType t) {
  std::vector<std::uint8_t> low(x.size() * kernels::dtype_size(t));
  kernels::convert_from_f32(x.data(), low.data(), t, x.size());
  kernels::convert_to_f32(low.data(), t, x.data(), x.size());
  return x;
}

TEST(CudaKernels, GroupedLinearMatchesCpuWithEmptyAndUnevenGroups) {
  SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const std::int64_t N = 96, K = 80;
  const std::vector<std::int64_t> ms = {0, 1, 7, 0, 33, 7, 128};  // empty, repeated and uneven row counts
  for (const DType t : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(dtype_label(t));
    kernels::GroupedGemmWorkspace ws;  // per type: fell_back must say which types cuBLAS refused
    Rng rng(14);
    std::vector<TestWeight> w;
    std::vector<std::vector<float>> x, expected;
    std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> dw, dx;
    std::vector<std::unique_ptr<DeviceBuffer<float>>> dy;
    std::vector<kernels::GroupedLinearProblem> problems;
    for (const std::int64_t m : ms) {
      w.push_back(make_weight(rng, t, N, K));
      x.push_back(rounded(rng.uniform_vector(static_cast<std::size_t>(m * K)), t));
      expected.emplace_back(static_cast<std::size_t>(m * N));
      if (m > 0) kernels::linear(x.back().data(), m, w.back().view(), nullptr, expected.back().data());
      std::vector<std::uint8_t> low(x.back().size() * kernels::dtype_size(t));
      kernels::convert_from_f32(x.back().data(), low.data(), t, x.back().size());
      dw.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(w.back().bytes));
      dx.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(low));
      dy.push_back(std::make_unique<DeviceBuffer<float>>(expected.back().size()));
      problems.push_back({dx.back()->get(), dw.back()->get(), dy.back()->get(), m});
    }
    ASSERT_OK(kernels::grouped_linear_cuda(handle, problems.data(), static_cast<std::int64_t>(problems.size()), N, K,
                                           t, ws, nullptr));
    for (std::size_t i = 0; i < ms.size(); ++i) {
      if (ms[i] == 0) continue;
      EXPECT_LT(nmse(dy[i]->host(), as_double(expected[i])), 1e-10) << "problem " << i;
    }
    std::cout << "[ grouped  ] " << dtype_label(t) << ": cublasGemmGroupedBatchedEx "
              << (ws.fell_back ? "refused: ran GemmEx per problem" : "ran grouped") << "\n";
    // The fallback also catches CUBLAS_STATUS_INVALID_VALUE, so wrong arguments of ours would
    // pass above as a refusal; float32 in and out is in every grouped cuBLAS's list, so a
    // refusal there means our arguments are wrong.
    if (t == DType::F32) {
      EXPECT_FALSE(ws.fell_back) << "cuBLAS refused a float32 grouped GEMM: check its arguments";
    }
  }
  cublasDestroy(handle);
}

// Experts of ms[e] rows each (every other one scaled by its routing weights) with the cpu
// swiglu_ffn of each, uploaded as ExpertProblems; the caller points their outputs somewhere.
struct ExpertCase {
  struct Expert {
    TestWeight gate, up, down;
    std::vector<float> x, scale, expected;
  };
  std::vector<Expert> experts;
  std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> weights;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> inputs;
  std::vector<kernels::ExpertProblem> problems;
};

ExpertCase make_expert_case(Rng& rng, DType t, std::int64_t H, std::int64_t I, const std::vector<std::int64_t>& ms) {
  ExpertCase c;
  for (std::size_t e = 0; e < ms.size(); ++e) {
    const std::int64_t m = ms[e];
    ExpertCase::Expert ex{make_weight(rng, t, I, H), make_weight(rng, t, I, H), make_weight(rng, t, H, I),
                          rounded(rng.uniform_vector(static_cast<std::size_t>(m * H)), t),
                          rng.uniform_vector(static_cast<std::size_t>(m), 0.1f, 1.0f), {}};
    ex.expected.resize(static_cast<std::size_t>(m * H));
    const bool scaled = e % 2 == 0;
    kernels::SwigluScratch scratch;
    if (m > 0)
      kernels::swiglu_ffn(ex.x.data(), m, ex.gate.view(), ex.up.view(), ex.down.view(), ex.expected.data(), scratch,
                          scaled ? ex.scale.data() : nullptr, false, kernels::GemmInputs::WeightType);
    kernels::ExpertProblem p;
    for (const TestWeight* w : {&ex.gate, &ex.up, &ex.down})
      c.weights.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(w->bytes));
    p.gate = c.weights[c.weights.size() - 3]->get();
    p.up = c.weights[c.weights.size() - 2]->get();
    p.down = c.weights[c.weights.size() - 1]->get();
    c.inputs.push_back(std::make_unique<DeviceBuffer<float>>(ex.x));
    p.x = c.inputs.back()->get();
    c.inputs.push_back(std::make_unique<DeviceBuffer<float>>(ex.scale));
    p.row_scale = scaled ? c.inputs.back()->get() : nullptr;
    p.m = m;
    c.problems.push_back(p);
    c.experts.push_back(std::move(ex));
  }
  return c;
}

// swiglu_experts_cuda over `c` (its outputs start as NaN, so unwritten rows show) against the
// cpu; returns the route its GEMMs took.
kernels::GroupedRoute swiglu_experts_against_cpu(cublasHandle_t handle, ExpertCase& c, DType t, std::int64_t H,
                                                 std::int64_t I, bool small_m, bool tensor_core = false) {
  kernels::ExpertWorkspace ws;
  ws.gemm.small_m = small_m;
  ws.gemm.tensor_core = tensor_core;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> outputs;
  for (std::size_t e = 0; e < c.problems.size(); ++e) {
    outputs.push_back(std::make_unique<DeviceBuffer<float>>(std::vector<float>(c.experts[e].expected.size(), NAN)));
    c.problems[e].y = outputs.back()->get();
  }
  const Status status = kernels::swiglu_experts_cuda(handle, c.problems.data(),
                                                     static_cast<std::int64_t>(c.problems.size()), H, I, t, ws, nullptr);
  EXPECT_TRUE(status.ok()) << status.message();
  for (std::size_t e = 0; e < c.problems.size(); ++e) {
    if (c.problems[e].m == 0) continue;
    // The same roundings on both sides (the cpu under GemmInputs::WeightType): what is left is
    // the order of float32 sums, and an h that this flips across a 16-bit rounding boundary
    // (one ulp of one element: about 1e-7 of the output's energy each, and rare).
    EXPECT_LT(nmse(outputs[e]->host(), as_double(c.experts[e].expected)), t == DType::F32 ? 1e-10 : 1e-6)
        << "expert " << e;
  }
  return ws.gemm.last_route;
}

TEST(CudaKernels, SwigluExpertsMatchCpu) {
  SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const std::int64_t H = 128, I = 96;
  // 64 rows: past the small-m bound, so the whole call takes the cuBLAS route.
  const std::vector<std::int64_t> ms = {3, 0, 17, 1, 64};
  for (const DType t : {DType::F32, DType::BF16}) {
    SCOPED_TRACE(dtype_label(t));
    Rng rng(15);
    ExpertCase c = make_expert_case(rng, t, H, I, ms);
    EXPECT_NE(swiglu_experts_against_cpu(handle, c, t, H, I, true), kernels::GroupedRoute::kSmallM);
  }
  cublasDestroy(handle);
}

// One grouped_linear_cuda call over problems of `ms` rows against the cpu linear on the same
// rounded activations; returns the route the call took.
kernels::GroupedRoute grouped_linear_against_cpu(DType t, std::int64_t N, std::int64_t K,
                                                 const std::vector<std::int64_t>& ms, bool small_m,
                                                 bool tensor_core = false) {
  cublasHandle_t handle = nullptr;
  EXPECT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  kernels::GroupedGemmWorkspace ws;
  ws.small_m = small_m;
  ws.tensor_core = tensor_core;
  Rng rng(21);
  std::vector<std::vector<float>> expected;
  std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> dw, dx;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> dy;
  std::vector<kernels::GroupedLinearProblem> problems;
  for (const std::int64_t m : ms) {
    const TestWeight w = make_weight(rng, t, N, K);
    const std::vector<float> x = rounded(rng.uniform_vector(static_cast<std::size_t>(m * K)), t);
    expected.emplace_back(static_cast<std::size_t>(m * N));
    if (m > 0) kernels::linear(x.data(), m, w.view(), nullptr, expected.back().data());
    std::vector<std::uint8_t> low(x.size() * kernels::dtype_size(t));
    kernels::convert_from_f32(x.data(), low.data(), t, x.size());
    dw.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(w.bytes));
    dx.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(low));
    // NaN where nothing should be written stays visible: every element must be overwritten.
    dy.push_back(std::make_unique<DeviceBuffer<float>>(std::vector<float>(expected.back().size(), NAN)));
    problems.push_back({dx.back()->get(), dw.back()->get(), dy.back()->get(), m});
  }
  const Status status = kernels::grouped_linear_cuda(handle, problems.data(), static_cast<std::int64_t>(problems.size()),
                                                     N, K, t, ws, nullptr);
  EXPECT_TRUE(status.ok()) << status.message();
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (ms[i] == 0) continue;
    EXPECT_LT(nmse(dy[i]->host(), as_double(expected[i])), 1e-10) << "problem " << i << " (m " << ms[i] << ")";
  }
  cublasDestroy(handle);
  return ws.last_route;
}

TEST(CudaKernels, SmallMGroupedLinearMatchesCpu) {
  SKIP_WITHOUT_GPU();
  // Empty, single-row, uneven and full pieces, and 24 rows (two pieces: 16 + 8); N = 100 is no
  // multiple of a warp's 4 features nor of a tile, K = 72 no multiple of 32 lanes' loads.
  const std::vector<std::int64_t> ms = {0, 1, 3, 8, 16, 0, 5, 24};
  for (const DType t : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(dtype_label(t));
    EXPECT_EQ(grouped_linear_against_cpu(t, 100, 72, ms, true), kernels::GroupedRoute::kSmallM);
    // 16 rows of K = 1024 are 64 KiB of shared memory: above the 48 KiB a launch gets unasked.
    EXPECT_EQ(grouped_linear_against_cpu(t, 40, 1024, {16, 2, 0, 9}, true), kernels::GroupedRoute::kSmallM);
    EXPECT_NE(grouped_linear_against_cpu(t, 100, 72, ms, false), kernels::GroupedRoute::kSmallM);
  }
}

TEST(CudaKernels, SmallMFallsBackToCublasWhereItCannotRun) {
  SKIP_WITHOUT_GPU();
  // K = 70: a bf16/f16 weight row is 140 bytes, no 16-byte multiple; f32: 280, neither.
  for (const DType t : {DType::BF16, DType::F16, DType::F32}) {
    SCOPED_TRACE(dtype_label(t));
    EXPECT_NE(grouped_linear_against_cpu(t, 36, 70, {1, 4, 0}, true), kernels::GroupedRoute::kSmallM);
  }
  // More rows than the bound: cuBLAS, whatever the others.
  EXPECT_NE(grouped_linear_against_cpu(DType::BF16, 64, 64, {1, 33}, true), kernels::GroupedRoute::kSmallM);
}

// dense_small_m_cuda against the cpu linear: outputs of 100, 36 and 1 features (no multiple of a
// warp's 4 nor of a tile) from one input, with and without bias, accumulating or not, from
// float32 rows rounded in the kernel, and ffn_down's form (silu(x)·up, row weights).
TEST(CudaKernels, DenseSmallMMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const std::int64_t K = 72;
  const std::vector<std::int64_t> Ns = {100, 36, 1};
  for (const DType t : {DType::BF16, DType::F16, DType::F32}) {
    for (const std::int64_t m : {1, 3, 16}) {
      for (const bool accumulate : {false, true}) {
        for (const bool silu : {false, true}) {
          SCOPED_TRACE(std::string(dtype_label(t)) + " m " + std::to_string(m) + (accumulate ? " accumulate" : "") +
                       (silu ? " silu·up, row weights" : ""));
          Rng rng(31 + static_cast<std::uint64_t>(m));
          const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(m * K), -3.0f, 3.0f);
          const std::vector<float> up = rng.uniform_vector(x.size());
          const std::vector<float> scale = rng.uniform_vector(static_cast<std::size_t>(m));
          // What the kernel multiplies: x (or silu(x)·up, as silu_mul_cuda) rounded to t.
          std::vector<float> in = x;
          if (silu)
            for (std::size_t i = 0; i < in.size(); ++i) in[i] = x[i] / (1.0f + std::exp(-x[i])) * up[i];
          in = rounded(in, t);
          DeviceBuffer<float> dx(x), dup(up), dscale(scale);
          std::vector<TestWeight> w;
          std::vector<std::vector<float>> bias, expected;
          std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> dw;
          std::vector<std::unique_ptr<DeviceBuffer<float>>> dbias, dy;
          std::vector<kernels::DenseSmallMOutput> outs;
          for (std::size_t j = 0; j < Ns.size(); ++j) {
            const std::int64_t N = Ns[j];
            w.push_back(make_weight(rng, t, N, K));
            bias.push_back(rng.uniform_vector(static_cast<std::size_t>(N)));
            const bool with_bias = j != 1 && !silu;
            const std::vector<float> y0 = rng.uniform_vector(static_cast<std::size_t>(m * N));
            std::vector<float> product(y0.size());
            kernels::linear(in.data(), m, w.back().view(), nullptr, product.data());
            expected.emplace_back(y0.size());
            for (std::int64_t r = 0; r < m; ++r)
              for (std::int64_t n = 0; n < N; ++n) {
                const auto i = static_cast<std::size_t>(r * N + n);
                float v = product[i];
                if (silu) v *= scale[static_cast<std::size_t>(r)];
                expected.back()[i] = v + (accumulate ? y0[i] : 0.0f) + (with_bias ? bias.back()[static_cast<std::size_t>(n)] : 0.0f);
              }
            dw.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(w.back().bytes));
            dbias.push_back(std::make_unique<DeviceBuffer<float>>(bias.back()));
            // Without accumulate the kernel must overwrite every element: NaN shows one it missed.
            dy.push_back(std::make_unique<DeviceBuffer<float>>(accumulate ? y0 : std::vector<float>(y0.size(), NAN)));
            outs.push_back({dw.back()->get(), with_bias ? dbias.back()->get() : nullptr, dy.back()->get(), N});
          }
          kernels::DenseSmallMPlan plan;
          ASSERT_OK(kernels::plan_dense_small_m_for(m, K, t, outs.data(), static_cast<int>(outs.size()), plan));
          ASSERT_TRUE(plan.use) << plan.why_not;
          ASSERT_OK(kernels::dense_small_m_cuda(plan, dx.get(), silu ? dup.get() : nullptr, silu ? dscale.get() : nullptr,
                                                m, K, t, outs.data(), static_cast<int>(outs.size()), accumulate, nullptr));
          for (std::size_t j = 0; j < Ns.size(); ++j)
            EXPECT_LT(nmse(dy[j]->host(), as_double(expected[j])), 1e-10) << "output " << j << " (N " << Ns[j] << ")";
        }
      }
    }
  }
}

// 16 rows of K = 2048 are 128 KiB of shared memory (the opt-in attribute), and q, k and v of
// Qwen3-30B-A3B's shape in one launch: every CTA range lands in its own output.
TEST(CudaKernels, DenseSmallMTakesQkvOfOneInputInOneLaunch) {
  SKIP_WITHOUT_GPU();
  const std::int64_t K = 2048, m = 16;
  const std::vector<std::int64_t> Ns = {4096, 512, 512};
  Rng rng(41);
  const std::vector<float> x = rng.uniform_vector(static_cast<std::size_t>(m * K));
  const std::vector<float> in = rounded(x, DType::BF16);
  DeviceBuffer<float> dx(x);
  std::vector<std::unique_ptr<DeviceBuffer<std::uint8_t>>> dw;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> dy;
  std::vector<std::vector<float>> expected;
  std::vector<kernels::DenseSmallMOutput> outs;
  for (const std::int64_t N : Ns) {
    const TestWeight w = make_weight(rng, DType::BF16, N, K);
    expected.emplace_back(static_cast<std::size_t>(m * N));
    kernels::linear(in.data(), m, w.view(), nullptr, expected.back().data());
    dw.push_back(std::make_unique<DeviceBuffer<std::uint8_t>>(w.bytes));
    dy.push_back(std::make_unique<DeviceBuffer<float>>(std::vector<float>(static_cast<std::size_t>(m * N), NAN)));
    outs.push_back({dw.back()->get(), nullptr, dy.back()->get(), N});
  }
  kernels::DenseSmallMPlan plan;
  ASSERT_OK(kernels::plan_dense_small_m_for(m, K, DType::BF16, outs.data(), 3, plan));
  ASSERT_TRUE(plan.use) << plan.why_not;
  ASSERT_GT(plan.smem_bytes, 48u * 1024u);
  ASSERT_OK(kernels::dense_small_m_cuda(plan, dx.get(), nullptr, nullptr, m, K, DType::BF16, outs.data(), 3, false, nullptr));
  for (std::size_t j = 0; j < Ns.size(); ++j)
    EXPECT_LT(nmse(dy[j]->host(), as_double(expected[j])), 1e-10) << "output " << j;
}

// Our tensor-core kernel (grouped_tensor_core.cu) against the cpu: tiles of 32 rows, so a
// problem of 31, 32, 33 and 70 rows ends a tile early, exactly or one row in; 256 features are
// two CTAs' columns, K = 96 three steps of 32.
TEST(CudaKernels, TensorCoreGroupedLinearMatchesCpu) {
  SKIP_WITHOUT_GPU();
  const std::vector<std::int64_t> ms = {0, 1, 31, 32, 33, 70, 5};
  for (const DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtype_label(t));
    EXPECT_EQ(grouped_linear_against_cpu(t, 256, 96, ms, false, true), kernels::GroupedRoute::kTensorCore);
    // Past the small-m bound, the small-m kernel declines and the tensor cores take the call.
    EXPECT_EQ(grouped_linear_against_cpu(t, 128, 2048, {40, 0, 3}, true, true), kernels::GroupedRoute::kTensorCore);
    // Below kTensorCoreMinRows the small-m kernel keeps what it can run; from there the tensor
    // cores take it.
    EXPECT_EQ(grouped_linear_against_cpu(t, 256, 96, {1, 8}, true, true), kernels::GroupedRoute::kSmallM);
    EXPECT_EQ(grouped_linear_against_cpu(t, 256, 96, {1, 16, 0}, true, true), kernels::GroupedRoute::kTensorCore);
  }
}

TEST(CudaKernels, TensorCoreLeavesToCublasWhatItCannotRun) {
  SKIP_WITHOUT_GPU();
  // f32 weights; N = 100 no multiple of 128 features; K = 72 no multiple of 32.
  EXPECT_NE(grouped_linear_against_cpu(DType::F32, 256, 96, {40, 2}, false, true), kernels::GroupedRoute::kTensorCore);
  EXPECT_NE(grouped_linear_against_cpu(DType::BF16, 100, 96, {40, 2}, false, true), kernels::GroupedRoute::kTensorCore);
  EXPECT_NE(grouped_linear_against_cpu(DType::BF16, 256, 72, {40, 2}, false, true), kernels::GroupedRoute::kTensorCore);
  // Turned off on the workspace (as SY_CUDA_TENSOR_CORE=0 does for all): cuBLAS.
  EXPECT_NE(grouped_linear_against_cpu(DType::BF16, 256, 96, {40, 2}, false, false), kernels::GroupedRoute::kTensorCore);
}

// What the tensor-core kernel takes, decided on the host: no GPU needed.
TEST(TensorCorePlan, NamesWhatItCannotRun) {
  alignas(16) static const std::uint16_t data[64] = {};
  const void* ok = data;
  const void* odd = reinterpret_cast<const char*>(data) + 2;
  const std::vector<kernels::GroupedLinearProblem> good = {{ok, ok, nullptr, 40}, {odd, odd, nullptr, 0}};
  EXPECT_EQ(kernels::tensor_core_refusal(good.data(), 2, 256, 96, DType::BF16), "");
  EXPECT_EQ(kernels::tensor_core_refusal(good.data(), 2, 256, 96, DType::F16), "");
  EXPECT_NE(kernels::tensor_core_refusal(good.data(), 2, 256, 96, DType::F32).find("neither bf16 nor f16"),
            std::string::npos);
  EXPECT_NE(kernels::tensor_core_refusal(good.data(), 2, 100, 96, DType::BF16).find("N is no multiple of 128"),
            std::string::npos);
  EXPECT_NE(kernels::tensor_core_refusal(good.data(), 2, 256, 72, DType::BF16).find("K is no multiple of 32"),
            std::string::npos);
  const std::vector<kernels::GroupedLinearProblem> unaligned = {{ok, odd, nullptr, 1}};
  EXPECT_NE(kernels::tensor_core_refusal(unaligned.data(), 1, 256, 96, DType::BF16).find("16-byte aligned"),
            std::string::npos);
  // One grid's y holds 65 535 tiles of 32 rows.
  const std::vector<kernels::GroupedLinearProblem> huge = {{ok, ok, nullptr, 65535 * 32 + 1}};
  EXPECT_NE(kernels::tensor_core_refusal(huge.data(), 1, 256, 96, DType::BF16).find("row tiles"), std::string::npos);
}

TEST(CudaKernels, SwigluExpertsMatchCpuThroughTheTensorCores) {
  SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const std::int64_t H = 256, I = 128;  // both GEMMs' N and K fit the kernel's tiles
  for (const std::vector<std::int64_t>& ms : {std::vector<std::int64_t>{3, 0, 40, 1, 64, 33},
                                              std::vector<std::int64_t>{3, 16, 0, 9}}) {  // small-m could run
    for (const DType t : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(dtype_label(t));
      Rng rng(23);
      ExpertCase c = make_expert_case(rng, t, H, I, ms);
      EXPECT_EQ(swiglu_experts_against_cpu(handle, c, t, H, I, true, true), kernels::GroupedRoute::kTensorCore);
    }
  }
  // Below kTensorCoreMinRows rows: the small-m kernel.
  Rng rng(24);
  ExpertCase small = make_expert_case(rng, DType::BF16, H, I, {3, 8, 0});
  EXPECT_EQ(swiglu_experts_against_cpu(handle, small, DType::BF16, H, I, true, true), kernels::GroupedRoute::kSmallM);
  cublasDestroy(handle);
}

TEST(CudaKernels, SwigluExpertsMatchCpuThroughBothRoutes) {
  SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const std::int64_t H = 136, I = 104;  // multiples of 8, not of a tile or a warp's loads
  const std::vector<std::int64_t> ms = {3, 0, 16, 1, 8, 20};
  for (const DType t : {DType::F32, DType::BF16, DType::F16}) {
    Rng rng(22);
    ExpertCase c = make_expert_case(rng, t, H, I, ms);
    for (const bool small_m : {true, false}) {
      SCOPED_TRACE(std::string(dtype_label(t)) + (small_m ? " small-m" : " cuBLAS"));
      EXPECT_EQ(swiglu_experts_against_cpu(handle, c, t, H, I, small_m) == kernels::GroupedRoute::kSmallM, small_m);
    }
  }
  cublasDestroy(handle);
}

TEST(CudaKernels, SharedExpertGateMatchesCpu) {
  SKIP_WITHOUT_GPU();
  // ModelOps::shared_expert: sigmoid(x · gate_wᵀ) scales the shared expert's output (qwen2_moe).
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  Rng rng(16);
  const std::int64_t n = 21, H = 128, I = 64;
  const TestWeight gate_w = make_weight(rng, DType::BF16, 1, H), gate = make_weight(rng, DType::BF16, I, H),
                   up = make_weight(rng, DType::BF16, I, H), down = make_weight(rng, DType::BF16, H, I);
  const std::vector<float> x = rounded(rng.uniform_vector(static_cast<std::size_t>(n * H)), DType::BF16);
  std::vector<float> g(static_cast<std::size_t>(n)), expected(static_cast<std::size_t>(n * H));
  kernels::linear(x.data(), n, gate_w.view(), nullptr, g.data());
  for (float& v : g) v = 1.0f / (1.0f + std::exp(-v));
  kernels::SwigluScratch scratch;
  kernels::swiglu_ffn(x.data(), n, gate.view(), up.view(), down.view(), expected.data(), scratch, g.data(), false,
                      kernels::GemmInputs::WeightType);

  std::vector<std::uint16_t> x16(x.size());
  kernels::convert_from_f32(x.data(), x16.data(), DType::BF16, x.size());
  DeviceBuffer<std::uint16_t> dx16(x16);
  DeviceBuffer<float> dx(x), dg(g.size()), dy(expected.size());
  DeviceBuffer<std::uint8_t> dgw(gate_w.bytes), dgate(gate.bytes), dup(up.bytes), ddown(down.bytes);
  ASSERT_OK(kernels::linear_bf16_cuda(handle, dx16.get(), n, reinterpret_cast<const std::uint16_t*>(dgw.get()), 1, H,
                                      nullptr, dg.get(), false, nullptr));
  ASSERT_OK(kernels::sigmoid_cuda(dg.get(), n, nullptr));
  EXPECT_LT(nmse(dg.host(), as_double(g)), 1e-10);
  kernels::ExpertWorkspace ws;
  const kernels::ExpertProblem p{dx.get(), dy.get(), dg.get(), dgate.get(), dup.get(), ddown.get(), n};
  ASSERT_OK(kernels::swiglu_experts_cuda(handle, &p, 1, H, I, DType::BF16, ws, nullptr));
  EXPECT_LT(nmse(dy.host(), as_double(expected)), 1e-6);  // as in swiglu_experts_against_cpu
  cublasDestroy(handle);
}

TEST(CudaKernels, CombineMatchesCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  Rng rng(17);
  const std::int64_t n = 13, H = 300;
  for (const std::int32_t K : {1, 2, 8})
    for (const bool with_shared : {false, true}) {
      SCOPED_TRACE("K=" + std::to_string(K) + (with_shared ? " shared" : ""));
      const std::vector<float> slots = rng.uniform_vector(static_cast<std::size_t>(n * K * H));
      const std::vector<float> shared = rng.uniform_vector(static_cast<std::size_t>(n * H));
      const std::vector<float> hidden = rng.uniform_vector(static_cast<std::size_t>(n * H));
      // ModelOps::combine's loop: slots in rank order, then the shared row, then into hidden.
      std::vector<float> expected = hidden;
      for (std::int64_t t = 0; t < n; ++t)
        for (std::int64_t i = 0; i < H; ++i) {
          float acc = slots[static_cast<std::size_t>((t * K) * H + i)];
          for (std::int32_t r = 1; r < K; ++r) acc += slots[static_cast<std::size_t>((t * K + r) * H + i)];
          if (with_shared) acc += shared[static_cast<std::size_t>(t * H + i)];
          expected[static_cast<std::size_t>(t * H + i)] += acc;
        }
      DeviceBuffer<float> dslots(slots), dshared(shared), dhidden(hidden);
      ASSERT_OK(kernels::combine_cuda(dslots.get(), with_shared ? dshared.get() : nullptr, n, K, H, dhidden.get(), nullptr));
      EXPECT_EQ(dhidden.host(), expected);
    }
}

TEST(CudaKernels, GatherRowsPicksRows) {
  SKIP_WITHOUT_GPU();
  Rng rng(18);
  const std::int64_t width = 70;
  const std::vector<float> src = rng.uniform_vector(static_cast<std::size_t>(10 * width));
  const std::vector<std::int32_t> rows = {9, 0, 4, 4};
  std::vector<float> expected;
  for (const std::int32_t r : rows) expected.insert(expected.end(), src.begin() + r * width, src.begin() + (r + 1) * width);
  DeviceBuffer<float> dsrc(src), ddst(expected.size());
  DeviceBuffer<std::int32_t> drows(rows);
  ASSERT_OK(kernels::gather_rows_cuda(dsrc.get(), drows.get(), static_cast<std::int64_t>(rows.size()), width, ddst.get(), nullptr));
  EXPECT_EQ(ddst.host(), expected);
}

TEST(CudaKernels, CopyRowsFollowsThePointerTables) {
  SKIP_WITHOUT_GPU();
  Rng rng(21);
  const std::int64_t width = 513;
  const std::vector<float> src = rng.uniform_vector(static_cast<std::size_t>(6 * width));
  DeviceBuffer<float> dsrc(src), ddst(static_cast<std::size_t>(6 * width));
  // Row i of the destination takes source row 5 - i.
  std::vector<const float*> from;
  std::vector<float*> to;
  for (std::int64_t i = 0; i < 6; ++i) {
    from.push_back(dsrc.get() + (5 - i) * width);
    to.push_back(ddst.get() + i * width);
  }
  DeviceBuffer<const float*> dfrom(from);
  DeviceBuffer<float*> dto(to);
  ASSERT_OK(kernels::copy_rows_cuda(dfrom.get(), dto.get(), 6, width, nullptr));
  const std::vector<float> got = ddst.host();
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t c = 0; c < width; ++c)
      ASSERT_EQ(got[static_cast<std::size_t>(i * width + c)], src[static_cast<std::size_t>((5 - i) * width + c)]);
}

TEST(CudaKernels, LinearMatchesCpuInEveryWeightType) {
  SKIP_WITHOUT_GPU();
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const std::int64_t M = 9, N = 70, K = 96;
  for (const DType t : {DType::F32, DType::F16, DType::BF16}) {
    SCOPED_TRACE(dtype_label(t));
    Rng rng(22);
    const TestWeight w = make_weight(rng, t, N, K);
    const std::vector<float> x = rounded(rng.uniform_vector(static_cast<std::size_t>(M * K)), t);
    const std::vector<float> bias = rng.uniform_vector(static_cast<std::size_t>(N));
    std::vector<float> expected(static_cast<std::size_t>(M * N));
    kernels::linear(x.data(), M, w.view(), bias.data(), expected.data());
    DeviceBuffer<float> dx(x), dbias(bias), dy(expected.size());
    DeviceBuffer<std::uint8_t> dlow(x.size() * kernels::dtype_size(t)), dw(w.bytes);
    ASSERT_OK(kernels::convert_from_f32_cuda(dx.get(), dlow.get(), t, static_cast<std::int64_t>(x.size()), nullptr));
    ASSERT_OK(kernels::linear_cuda(handle, dlow.get(), t, M, dw.get(), N, K, dbias.get(), dy.get(), false, nullptr));
    EXPECT_LT(nmse(dy.host(), as_double(expected)), 1e-10);
  }
  cublasDestroy(handle);
}

// Rows of logits and per-row settings; returns the GPU's tokens.
std::vector<std::int32_t> sample_on_gpu(const std::vector<float>& logits, std::int32_t vocab,
                                        const std::vector<kernels::DeviceSamplingParams>& params) {
  DeviceBuffer<float> dl(logits);
  DeviceBuffer<kernels::DeviceSamplingParams> dp(params);
  DeviceBuffer<std::int32_t> dout(params.size());
  const Status s = kernels::sample_cuda(dl.get(), static_cast<std::int64_t>(params.size()), vocab, dp.get(), dout.get(), nullptr);
  if (!s.ok()) throw std::runtime_error(s.message());
  return dout.host();
}

TEST(CudaKernels, SamplingMatchesCpuSampler) {
  SKIP_WITHOUT_GPU();
  const std::int32_t vocab = 5003;
  const int rows = 48;
  Rng rng(19);
  std::vector<float> logits = rng.uniform_vector(static_cast<std::size_t>(rows) * vocab, -6.0f, 6.0f);
  logits[17] = NAN;                              // NaN: weight 0, never drawn
  logits[vocab + 3] = logits[vocab + 4] = 9.0f;  // a tie at the top
  // Greedy, plain temperature, top-k, top-p, both, a top-k wider than the vocabulary, and
  // min-p alone, with top-p and with top-k.
  const std::vector<kernels::SamplingParams> settings = {
      {0.0f, 1.0f, 0},         {0.8f, 1.0f, 0},       {1.0f, 1.0f, 40},      {0.7f, 0.9f, 0},
      {1.3f, 0.8f, 100},       {1.0f, 1.0f, 99999},   {1.0f, 1.0f, 0, 0.01f}, {0.9f, 0.9f, 0, 0.05f},
      {1.2f, 1.0f, 60, 0.02f}};
  std::vector<kernels::DeviceSamplingParams> params;
  std::vector<std::int32_t> expected;
  for (int r = 0; r < rows; ++r) {
    const kernels::SamplingParams sp = settings[static_cast<std::size_t>(r) % settings.size()];
    const std::uint64_t seed = kernels::position_seed(1234, r);
    kernels::Sampler sampler(sp, seed);
    expected.push_back(sampler.sample(logits.data() + static_cast<std::size_t>(r) * vocab, vocab));
    params.push_back({sp.temperature, sp.top_p, sp.top_k, kernels::sampling_uniform(seed), sp.min_p});
  }
  // Greedy rows are exact. A drawn row differs only when u·total lands within float rounding of
  // a bucket edge (CUDA's expf and glibc's differ by an ulp; sums run in another order): about
  // 1e-3 of rows at this vocabulary, so at most two of the 40 drawn rows may differ.
  const std::vector<std::int32_t> got = sample_on_gpu(logits, vocab, params);
  int differ = 0;
  for (std::size_t r = 0; r < got.size(); ++r) {
    if (params[r].temperature == 0.0f) {
      EXPECT_EQ(got[r], expected[r]) << "greedy row " << r;
    } else if (got[r] != expected[r]) {
      ++differ;
    }
  }
  EXPECT_LE(differ, 2) << "drawn rows that differ from the CPU sampler";
}

// The host side needs no GPU: a bias joins its token's terms, or adds an entry of its own that
// only adds it; tokens outside the row are left out; earlier rows' entries stay as they were.
TEST(PenaltyEntries, MergeBiasesIntoTheTermsOfTheirTokens) {
  std::vector<kernels::PenaltyEntry> out = {{0, 5, 1.0f, 0.1f, 0.2f, 1.0f, 0.0f}};
  const kernels::PenaltyTerm terms[] = {{2, 0}, {4, 3}};
  const kernels::TokenBias biases[] = {{4, -1.5f}, {9, 2.0f}, {1000, 1.0f}, {-1, 1.0f}};
  kernels::append_penalty_entries(out, 1, 100, terms, biases, {0.5f, 0.25f, 1.5f});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[0].token, 5);
  EXPECT_EQ(out[0].row, 0);
  EXPECT_EQ(out[1].token, 2);
  EXPECT_EQ(out[1].count, 0.0f);
  EXPECT_EQ(out[1].repetition, 1.5f);
  EXPECT_EQ(out[1].bias, 0.0f);
  EXPECT_EQ(out[2].token, 4);
  EXPECT_EQ(out[2].count, 3.0f);
  EXPECT_EQ(out[2].bias, -1.5f);
  EXPECT_EQ(out[2].presence, 0.5f);
  EXPECT_EQ(out[2].frequency, 0.25f);
  EXPECT_EQ(out[3].token, 9);
  EXPECT_EQ(out[3].row, 1);
  EXPECT_EQ(out[3].count, 0.0f);
  EXPECT_EQ(out[3].repetition, 1.0f);
  EXPECT_EQ(out[3].bias, 2.0f);
}

// Biased and penalised logits are the cpu's bit for bit: the GPU rounds every sum, product,
// quotient and difference on its own, as apply_logit_bias and apply_penalties do (rows with and
// without a repetition penalty).
TEST(CudaKernels, PenaltiesMatchCpuBitForBit) {
  SKIP_WITHOUT_GPU();
  const std::int32_t vocab = 3001;
  const int rows = 5;
  Rng rng(23);
  const std::vector<float> logits = rng.uniform_vector(static_cast<std::size_t>(rows) * vocab, -8.0f, 8.0f);
  std::vector<float> expected = logits;
  std::vector<kernels::PenaltyEntry> entries;
  for (int r = 0; r < rows; ++r) {
    // Row r: 40·r sampled tokens (row 0 none) drawn from a small range, so most repeat.
    std::vector<std::int32_t> outputs;
    for (int i = 0; i < 40 * r; ++i) outputs.push_back(static_cast<std::int32_t>(rng.engine()() % 97) * 31);
    std::vector<std::int32_t> prompt;
    for (int i = 0; i < 10 * r; ++i) prompt.push_back(static_cast<std::int32_t>(rng.engine()() % 300) * 10);
    const kernels::Penalties p{0.3f * static_cast<float>(r) - 0.5f, 0.7f - 0.2f * static_cast<float>(r),
                               r % 2 == 0 ? 1.0f : 1.1f + 0.2f * static_cast<float>(r)};
    // A bias on a sampled token, on a token of neither list and on one outside the vocabulary.
    const std::vector<kernels::TokenBias> biases = {{31, 1.5f * static_cast<float>(r)}, {1, -3.0f}, {vocab + 2, 9.0f}};
    const auto terms = kernels::penalty_terms(prompt, outputs, p);
    float* row = expected.data() + static_cast<std::size_t>(r) * vocab;
    kernels::apply_logit_bias(row, vocab, biases);
    kernels::apply_penalties(row, vocab, terms, p);
    kernels::append_penalty_entries(entries, r, vocab, terms, biases, p);
  }
  DeviceBuffer<float> d(logits);
  DeviceBuffer<kernels::PenaltyEntry> de(entries);
  ASSERT_OK(kernels::penalize_cuda(d.get(), vocab, de.get(), static_cast<std::int64_t>(entries.size()), nullptr));
  EXPECT_EQ(d.host(), expected);
}

// Guided decoding's bitmask (mask_logits_cuda): the same -inf logits as the cpu's
// apply_token_mask on the guided rows, the other rows untouched, and the sampler draws only
// allowed tokens at temperature 1 and with top-p, including a row where one token is left (a
// complete grammar: eos alone). The vocabulary is not a multiple of 32.
TEST(CudaKernels, GuidedMaskMatchesCpuAndDrawsOnlyAllowed) {
  SKIP_WITHOUT_GPU();
  const std::int32_t vocab = 1000;
  const std::int32_t words = kernels::token_mask_words(vocab);
  const int rows = 5;
  const std::vector<std::int32_t> guided_rows = {0, 1, 3, 4};  // row 2 is not guided
  Rng rng(31);
  const std::vector<float> logits = rng.uniform_vector(static_cast<std::size_t>(rows) * vocab, -8.0f, 8.0f);
  std::vector<float> expected = logits;
  std::vector<std::vector<std::uint32_t>> masks(rows, std::vector<std::uint32_t>(static_cast<std::size_t>(words), 0u));
  std::vector<std::uint32_t> packed;
  for (const std::int32_t r : guided_rows) {
    for (std::int32_t t = 0; t < vocab; ++t) {
      const bool allowed = r == 3 ? t == 777 : (rng.engine()() % (r + 2)) == 0;
      if (allowed) masks[r][static_cast<std::size_t>(t) / 32] |= 1u << (t % 32);
    }
    kernels::apply_token_mask(expected.data() + static_cast<std::size_t>(r) * vocab, vocab, masks[r]);
    packed.insert(packed.end(), masks[r].begin(), masks[r].end());
  }
  std::fill(masks[2].begin(), masks[2].end(), ~0u);  // for the draws below: any token
  DeviceBuffer<float> d(logits);
  DeviceBuffer<std::int32_t> drows(guided_rows);
  DeviceBuffer<std::uint32_t> dmasks(packed);
  ASSERT_OK(kernels::mask_logits_cuda(d.get(), vocab, drows.get(), dmasks.get(),
                                      static_cast<std::int64_t>(guided_rows.size()), nullptr));
  EXPECT_EQ(d.host(), expected);
  for (int k = 0; k < 50; ++k) {
    std::vector<kernels::DeviceSamplingParams> params;
    for (int r = 0; r < rows; ++r)
      params.push_back({1.0f, r == 1 ? 0.9f : 1.0f, 0, (static_cast<double>(k) + 0.5) / 50.0, 0.0f});
    DeviceBuffer<kernels::DeviceSamplingParams> dp(params);
    DeviceBuffer<std::int32_t> dout(std::vector<std::int32_t>(rows, -1));
    ASSERT_OK(kernels::sample_cuda(d.get(), rows, vocab, dp.get(), dout.get(), nullptr));
    const std::vector<std::int32_t> out = dout.host();
    for (int r = 0; r < rows; ++r) {
      ASSERT_GE(out[r], 0);
      EXPECT_TRUE(masks[r][static_cast<std::size_t>(out[r]) / 32] >> (out[r] % 32) & 1u) << "row " << r << " drew " << out[r];
    }
    EXPECT_EQ(out[3], 777);
  }
}

TEST(CudaKernels, SamplingBeyondCandidatesKeepsTheDistribution) {
  SKIP_WITHOUT_GPU();
  // Flat logits keep thousands of tokens: past the GPU's 1024 sorted candidates the draw walks
  // the same kept set in token order. Stratified u = (i + ½)/N makes the empirical CDF of the
  // draws match the kept set's CDF (in token order) within 1/N, deterministically.
  const std::int32_t vocab = 8192;
  const int N = 2048;
  Rng rng(20);
  const std::vector<float> row = rng.uniform_vector(static_cast<std::size_t>(vocab), -0.5f, 0.5f);
  // With min-p too: 1e-3 keeps every token (the bound falls back to the min-p key), 0.75 keeps
  // those within ln(0.75) of the best, about 2 400 of them (a cut beyond the candidates).
  for (const kernels::SamplingParams sp :
       {kernels::SamplingParams{1.0f, 1.0f, 3000}, kernels::SamplingParams{1.0f, 0.9f, 0},
        kernels::SamplingParams{1.0f, 0.9f, 0, 1e-3f}, kernels::SamplingParams{1.0f, 1.0f, 3000, 1e-3f},
        kernels::SamplingParams{1.0f, 1.0f, 0, 0.75f}}) {
    SCOPED_TRACE("top_k " + std::to_string(sp.top_k) + " top_p " + std::to_string(sp.top_p) + " min_p " +
                 std::to_string(sp.min_p));
    // The kept set as Sampler defines it: ranks (logit desc, token asc), then the cut.
    std::vector<std::int32_t> order(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
      return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)] ||
             (row[static_cast<std::size_t>(a)] == row[static_cast<std::size_t>(b)] && a < b);
    });
    const float m = *std::max_element(row.begin(), row.end()) / sp.temperature;
    auto w = [&](std::int32_t t) { return static_cast<double>(std::exp(row[static_cast<std::size_t>(t)] / sp.temperature - m)); };
    // Min-p first (a prefix of the ranks: w is the probability relative to the best), then top-k.
    std::size_t kept = 0;
    while (kept < order.size() && w(order[kept]) >= static_cast<double>(sp.min_p)) ++kept;
    if (sp.top_k > 0) kept = std::min(kept, static_cast<std::size_t>(sp.top_k));
    if (sp.top_p < 1.0f) {
      double total = 0.0, acc = 0.0;
      for (std::size_t i = 0; i < kept; ++i) total += w(order[i]);
      for (std::size_t i = 0; i < kept; ++i)
        if ((acc += w(order[i])) >= sp.top_p * total) {
          kept = i + 1;
          break;
        }
    }
    std::vector<double> mass(static_cast<std::size_t>(vocab), 0.0);
    double kept_total = 0.0;
    for (std::size_t i = 0; i < kept; ++i) kept_total += (mass[static_cast<std::size_t>(order[i])] = w(order[i]));
    ASSERT_GT(kept, 1024u);
    std::vector<float> logits;
    std::vector<kernels::DeviceSamplingParams> params;
    for (int i = 0; i < N; ++i) {
      logits.insert(logits.end(), row.begin(), row.end());
      params.push_back({sp.temperature, sp.top_p, sp.top_k, (i + 0.5) / N, sp.min_p});
    }
    const std::vector<std::int32_t> got = sample_on_gpu(logits, vocab, params);
    std::vector<int> hits(static_cast<std::size_t>(vocab), 0);
    for (const std::int32_t t : got) {
      ASSERT_GT(mass[static_cast<std::size_t>(t)], 0.0) << "token " << t << " is outside the kept set";
      ++hits[static_cast<std::size_t>(t)];
    }
    double cdf = 0.0;
    int drawn = 0;
    double worst = 0.0;
    for (std::int32_t t = 0; t < vocab; ++t) {
      cdf += mass[static_cast<std::size_t>(t)] / kept_total;
      drawn += hits[static_cast<std::size_t>(t)];
      worst = std::max(worst, std::abs(cdf - static_cast<double>(drawn) / N));
    }
    EXPECT_LT(worst, 2.0 / N);
  }
}

// Arguments are checked before anything reaches the GPU, so these run on every machine.
TEST(CudaKernels, RouterRejectsMoreTokensThanOneLaunchHolds) {
  // One warp per token, four per block, at most 2^31 - 1 blocks: one token more must be refused,
  // not launched with an invalid grid (or, capped, leave tokens unrouted).
  const std::int64_t too_many = 0x7fffffffLL * 4 + 1;
  const Status s = kernels::router_topk_cuda(nullptr, too_many, 8, 2, true, nullptr, nullptr, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("token count"), std::string::npos) << s.message();
}

TEST(CudaKernels, RejectsHeadDimAbove256) {
  const kernels::KvLayerView view{nullptr, nullptr, 1, 16, 1, 512};
  const Status s = kernels::paged_attention_decode_cuda(nullptr, 1, 1, nullptr, view, nullptr, 1, 1.0f, nullptr, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("head_dim must be 1..256"), std::string::npos) << s.message();
}

// The small-m kernel's route and launch shape, decided on the host: these run on every machine.
kernels::SmallMRequest qwen_request(std::vector<std::int64_t> ms) {
  kernels::SmallMRequest r;
  r.ms = std::move(ms);
  r.N = 768;
  r.K = 2048;
  r.type = DType::BF16;
  r.weights_aligned = true;
  r.smem_limit = 227 * 1024;  // an H100's opt-in limit
  r.sm_count = 132;
  return r;
}

TEST(SmallMPlan, SplitsProblemsIntoPiecesAndSkipsEmptyOnes) {
  const kernels::SmallMPlan plan = kernels::plan_small_m(qwen_request({0, 1, 3, 8, 16, 0, 17, 32}));
  ASSERT_TRUE(plan.use) << plan.why_not;
  const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>> want = {
      {1, 0, 1}, {2, 0, 3}, {3, 0, 8}, {4, 0, 16}, {6, 0, 16}, {6, 16, 1}, {7, 0, 16}, {7, 16, 16}};
  ASSERT_EQ(plan.pieces.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(std::make_tuple(plan.pieces[i].problem, plan.pieces[i].row0, plan.pieces[i].rows), want[i]) << i;
  }
  EXPECT_EQ(plan.m_tile, 16);
  EXPECT_EQ(plan.smem_bytes, 16u * 2048u * 4u);
  EXPECT_EQ(plan.smem_limit, 227u * 1024u);
}

TEST(SmallMPlan, MTileIsThePowerOfTwoAboveTheLargestPiece) {
  for (const auto& [m, tile] : std::vector<std::pair<std::int64_t, int>>{{1, 1}, {2, 2}, {3, 4}, {5, 8}, {9, 16}, {16, 16}}) {
    const kernels::SmallMPlan plan = kernels::plan_small_m(qwen_request({1, m}));
    ASSERT_TRUE(plan.use) << plan.why_not;
    EXPECT_EQ(plan.m_tile, tile) << "m " << m;
    EXPECT_EQ(plan.smem_bytes, static_cast<std::size_t>(m) * 2048 * 4);
  }
}

TEST(SmallMPlan, TilesCoverEveryFeatureAndFillTheGpu) {
  for (const std::int64_t N : {1, 4, 31, 100, 768, 2048, 5000}) {
    for (const std::size_t problems : {1u, 8u, 128u}) {
      kernels::SmallMRequest r = qwen_request(std::vector<std::int64_t>(problems, 1));
      r.N = N;
      const kernels::SmallMPlan plan = kernels::plan_small_m(r);
      ASSERT_TRUE(plan.use) << plan.why_not;
      SCOPED_TRACE("N " + std::to_string(N) + ", problems " + std::to_string(problems));
      EXPECT_EQ(plan.rows_per_cta % kernels::kSmallMTileQuantum, 0);
      EXPECT_GT(plan.rows_per_cta, 0);
      EXPECT_GE(plan.tiles_per_piece * plan.rows_per_cta, N);
      EXPECT_LT((plan.tiles_per_piece - 1) * plan.rows_per_cta, N);  // no tile without features
      EXPECT_EQ(plan.blocks, plan.tiles_per_piece * static_cast<std::int64_t>(problems));
      EXPECT_LE(plan.rows_per_cta, 4 * kernels::kSmallMTileQuantum);
      // A larger tile is taken only while the grid still gives every SM two CTAs.
      if (plan.rows_per_cta > kernels::kSmallMTileQuantum && N > plan.rows_per_cta) {
        EXPECT_GE(plan.blocks, 2 * r.sm_count);
      }
    }
  }
  // Batch 1 on Qwen3-30B-A3B (8 experts, gate and up together: 16 problems): 32 features per
  // CTA make 384 CTAs; 64 would leave an H100's 132 SMs under two CTAs each.
  const kernels::SmallMPlan b1 = kernels::plan_small_m(qwen_request(std::vector<std::int64_t>(16, 1)));
  EXPECT_EQ(b1.rows_per_cta, 32);
  EXPECT_EQ(b1.blocks, 16 * 24);
}

TEST(SmallMPlan, DeclinesWhatTheKernelCannotRun) {
  auto why = [](kernels::SmallMRequest r) {
    const kernels::SmallMPlan plan = kernels::plan_small_m(r);
    EXPECT_FALSE(plan.use);
    EXPECT_TRUE(plan.pieces.empty());
    return plan.why_not;
  };
  kernels::SmallMRequest r = qwen_request({1, 33});
  EXPECT_NE(why(r).find("kSmallMMaxRows"), std::string::npos);
  r = qwen_request({0, 0});
  EXPECT_NE(why(r).find("no problem has rows"), std::string::npos);
  r = qwen_request({4});
  r.K = 2044;  // bf16 rows of 4088 bytes: no 16-byte multiple
  EXPECT_NE(why(r).find("16-byte weight load"), std::string::npos);
  r.type = DType::F32;  // 8176 bytes: aligned for f32
  EXPECT_TRUE(kernels::plan_small_m(r).use);
  r.K = 2046;
  EXPECT_NE(why(r).find("16-byte weight load"), std::string::npos);
  r = qwen_request({4});
  r.weights_aligned = false;
  EXPECT_NE(why(r).find("aligned"), std::string::npos);
  r = qwen_request({16});
  r.smem_limit = 16 * 2048 * 4 - 1;
  EXPECT_NE(why(r).find("shared memory"), std::string::npos);
  r.smem_limit = 16 * 2048 * 4;
  EXPECT_TRUE(kernels::plan_small_m(r).use);
  r.enabled = false;
  EXPECT_NE(why(r).find("disabled"), std::string::npos);
  r = qwen_request({1, -1});
  EXPECT_NE(why(r).find("negative"), std::string::npos);
}

kernels::DenseSmallMRequest qkv_request(std::int64_t m) {
  kernels::DenseSmallMRequest r;
  r.m = m;
  r.K = 2048;
  r.Ns = {4096, 512, 512};  // Qwen3-30B-A3B's q, k and v
  r.type = DType::BF16;
  r.weights_aligned = true;
  r.smem_limit = 227 * 1024;
  r.sm_count = 132;
  return r;
}

TEST(DenseSmallMPlan, GivesEachOutputItsOwnRunOfTiles) {
  for (const std::int64_t m : {1, 2, 5, 16}) {
    const kernels::DenseSmallMPlan plan = kernels::plan_dense_small_m(qkv_request(m));
    ASSERT_TRUE(plan.use) << plan.why_not;
    EXPECT_EQ(plan.m_tile, kernels::plan_small_m(qwen_request({m})).m_tile) << m;
    EXPECT_EQ(plan.smem_bytes, static_cast<std::size_t>(m) * 2048 * 4);
  }
  // 4096 + 512 + 512 features at 32 per CTA: 160 CTAs, the most that keep 2 per SM (64 per CTA
  // would make 80 of the 264 wanted); tile ranges in order, each covering its output.
  const kernels::DenseSmallMPlan plan = kernels::plan_dense_small_m(qkv_request(1));
  EXPECT_EQ(plan.rows_per_cta, 32);
  EXPECT_EQ(plan.tiles_begin, (std::vector<std::int64_t>{0, 128, 144, 160}));
  EXPECT_EQ(plan.blocks, 160);
  // A vocabulary-sized output fills the GPU with the largest tile.
  kernels::DenseSmallMRequest head = qkv_request(1);
  head.Ns = {151936};
  const kernels::DenseSmallMPlan lm = kernels::plan_dense_small_m(head);
  EXPECT_EQ(lm.rows_per_cta, 4 * kernels::kSmallMTileQuantum);
  EXPECT_EQ(lm.blocks, (151936 + lm.rows_per_cta - 1) / lm.rows_per_cta);
  // One feature (the shared expert's gate) is one CTA of its own.
  kernels::DenseSmallMRequest tiny = qkv_request(1);
  tiny.Ns = {1, 100};
  EXPECT_EQ(kernels::plan_dense_small_m(tiny).tiles_begin, (std::vector<std::int64_t>{0, 1, 5}));
}

TEST(DenseSmallMPlan, DeclinesWhatTheKernelCannotRun) {
  auto why = [](const kernels::DenseSmallMRequest& r) {
    const kernels::DenseSmallMPlan plan = kernels::plan_dense_small_m(r);
    EXPECT_FALSE(plan.use);
    EXPECT_TRUE(plan.tiles_begin.empty());
    return plan.why_not;
  };
  EXPECT_NE(why(qkv_request(0)).find("kSmallMPieceRows"), std::string::npos);
  EXPECT_NE(why(qkv_request(17)).find("kSmallMPieceRows"), std::string::npos);
  kernels::DenseSmallMRequest r = qkv_request(1);
  r.Ns = {};
  EXPECT_NE(why(r).find("outputs"), std::string::npos);
  r.Ns = {1, 2, 3, 4, 5};
  EXPECT_NE(why(r).find("outputs"), std::string::npos);
  r = qkv_request(1);
  r.Ns.push_back(0);
  EXPECT_NE(why(r).find("out of range"), std::string::npos);
  r = qkv_request(4);
  r.K = 2044;
  EXPECT_NE(why(r).find("16-byte weight load"), std::string::npos);
  r = qkv_request(4);
  r.weights_aligned = false;
  EXPECT_NE(why(r).find("aligned"), std::string::npos);
  r = qkv_request(16);
  r.K = 4096;  // o_proj's input at 16 rows: 256 KiB of x
  EXPECT_NE(why(r).find("shared memory"), std::string::npos);
  r = qkv_request(1);
  r.enabled = false;
  EXPECT_NE(why(r).find("disabled"), std::string::npos);
}

TEST(DenseSmallMPlan, IsOffUnlessTheEnvironmentAsks) {
  ASSERT_EQ(unsetenv("SY_CUDA_DENSE_SMALL_M"), 0);
  EXPECT_FALSE(kernels::dense_small_m_enabled_by_env());
  ASSERT_EQ(setenv("SY_CUDA_DENSE_SMALL_M", "0", 1), 0);
  EXPECT_FALSE(kernels::dense_small_m_enabled_by_env());
  ASSERT_EQ(setenv("SY_CUDA_DENSE_SMALL_M", "1", 1), 0);
  EXPECT_TRUE(kernels::dense_small_m_enabled_by_env());
  ASSERT_EQ(unsetenv("SY_CUDA_DENSE_SMALL_M"), 0);
}

TEST(SmallMPlan, EnvironmentSwitchForcesCublas) {
  ASSERT_EQ(unsetenv("SY_CUDA_SMALL_M"), 0);
  EXPECT_TRUE(kernels::small_m_enabled_by_env());
  ASSERT_EQ(setenv("SY_CUDA_SMALL_M", "1", 1), 0);
  EXPECT_TRUE(kernels::small_m_enabled_by_env());
  ASSERT_EQ(setenv("SY_CUDA_SMALL_M", "0", 1), 0);
  EXPECT_FALSE(kernels::small_m_enabled_by_env());
  ASSERT_EQ(unsetenv("SY_CUDA_SMALL_M"), 0);
}

}  // namespace
}  // namespace sy::test
