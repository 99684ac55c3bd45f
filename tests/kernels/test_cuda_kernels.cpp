// The CUDA kernels against the CPU kernels on the same inputs. Every test that needs a GPU
// skips itself where cuda_device_available() is false, so the suite passes on build machines
// and checks for real on GPU machines.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/cpu/dtype.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/paged_attention.h"
#include "kernels/cpu/rmsnorm.h"
#include "kernels/cpu/rope.h"
#include "kernels/cpu/router.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/swiglu.h"
#include "kernels/cuda/cuda_kernels.h"
#include "tests/kernels/reference.h"

namespace sy::test {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (!kernels::cuda_device_available()) GTEST_SKIP() << "no usable CUDA device"

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
  const kernels::Rope rope(dim, 1e6);
  std::vector<float> expected = x;
  rope.apply(expected.data(), tokens, heads, pos.data());
  DeviceBuffer<float> dx(x), dfreq(rope.inv_freq());
  DeviceBuffer<std::int32_t> dpos(pos);
  ASSERT_OK(kernels::rope_cuda(dx.get(), tokens, heads, dim, dfreq.get(), dpos.get(), nullptr));
  // Same float32 angles; CUDA's sincosf and glibc's may differ by an ulp or two.
  EXPECT_LT(nmse(dx.host(), as_double(expected)), 1e-12);
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

// Arguments are checked before anything reaches the GPU, so this runs on every machine.
TEST(CudaKernels, RejectsHeadDimAbove256) {
  const kernels::KvLayerView view{nullptr, nullptr, 1, 16, 1, 512};
  const Status s = kernels::paged_attention_decode_cuda(nullptr, 1, 1, nullptr, view, nullptr, 1, 1.0f, nullptr, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("head_dim must be 1..256"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace sy::test
