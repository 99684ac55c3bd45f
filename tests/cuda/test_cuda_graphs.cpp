// The cuda executor's decode CUDA graphs: a decode attention execution replayed from a graph
// gives bit for bit what the same padded kernels give eagerly (CudaExecutorOptions::
// pad_decode), at batch sizes on and across every bucket edge, and each graph is captured
// once and replayed after. Attention executions of every block are chained (each block's
// hidden rows the next one's input; the experts, which run eagerly in both, are left out),
// then sampled with log-probabilities, so the logits are compared too. Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/cuda/cuda_activation_ops.h"
#include "engine/cuda/cuda_deployment.h"
#include "engine/cuda/cuda_executor.h"
#include "engine/model/random_model.h"
#include "engine/runtime/wall_clock_event_loop.h"
#include "kernels/cuda/kernel_preload.h"
#include "tests/cuda/gpu_skips.h"

namespace sy {
namespace {

namespace fs = std::filesystem;

struct Waiter {
  bool done = false;
  void finished(ExecutionTiming) { done = true; }
};

// Queues one execution and runs the loop until it completed.
template <class Call>
void await(EventLoop& loop, Call&& call) {
  Waiter w;
  call(Completion::of<Waiter, &Waiter::finished>(&w));
  loop.run([&] { return w.done; });
  ASSERT_TRUE(w.done);
}

std::vector<std::uint32_t> bits(const Activations& a) {
  std::vector<std::uint32_t> v(static_cast<std::size_t>(a.rows() * a.width()));
  EXPECT_EQ(cudaMemcpy(v.data(), CudaActivationOps::data(a), v.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

std::vector<std::uint32_t> bits(const std::vector<float>& f) {
  std::vector<std::uint32_t> v(f.size());
  std::memcpy(v.data(), f.data(), f.size() * 4);
  return v;
}

// What one attention execution produced, as bits.
struct AttentionResult {
  std::vector<std::uint32_t> hidden, ffn_in, shared_out, weights;
  std::vector<std::int32_t> ids;
  bool operator==(const AttentionResult&) const = default;
};

// One executor serving S sequences: a prefill of every prompt, then decode steps of the
// first m sequences, every block's attention chained, then sampling.
class Driver {
 public:
  static constexpr std::int32_t kSequences = 31, kPagesPerSequence = 2, kPageSize = 16;

  Driver(std::shared_ptr<const DeviceModel> model, EventLoop& loop, CudaExecutorOptions o) : model_(model), loop_(loop) {
    o.attention_rank = true;
    o.kv_pages = kSequences * kPagesPerSequence;
    o.page_size = kPageSize;
    executor_ = std::make_unique<CudaExecutor>(model, o, loop);
    tables_.resize(kSequences);
    for (std::int32_t s = 0; s < kSequences; ++s) {
      tables_[s] = {s * kPagesPerSequence, s * kPagesPerSequence + 1};
      next_pos_.push_back(0);
    }
  }

  // Rows: (sequence, token) pairs, each sequence's rows contiguous; returns each block's
  // attention results and the sampled tokens and log-probabilities of the last rows.
  struct Step {
    std::vector<AttentionResult> blocks;
    std::vector<std::int32_t> next;
    std::vector<kernels::TokenLogprobs> logprobs;
  };
  Step step(const std::vector<std::pair<std::int32_t, std::int32_t>>& rows) {
    Step out;
    const ModelConfig& c = model_->config();
    TokenBatch batch;
    batch.columns = kAttentionColumns | kColumnToken;
    std::vector<SequenceContext> seqs;
    for (const auto& [s, token] : rows) {
      batch.row.push_back({.request = s, .position = next_pos_[s]++, .rank = 0, .token = token});
      if (seqs.empty() || seqs.back().request != s) {
        SequenceContext ctx;
        ctx.request = s;
        ctx.block_table = tables_[s].data();
        ctx.pages = kPagesPerSequence;
        ctx.sampling.logprobs = kernels::kMaxTopLogprobs;
        seqs.push_back(ctx);
      }
    }
    for (std::int32_t block = 0; block < c.num_layers; ++block) {
      RoutedRows routed;
      await(loop_, [&](Completion done) { executor_->attention(block, batch, seqs, routed, done); });
      AttentionResult r;
      r.hidden = bits(batch.hidden);
      if (!routed.ffn_in.null()) r.ffn_in = bits(routed.ffn_in);
      if (!routed.shared_out.null()) r.shared_out = bits(routed.shared_out);
      r.ids = routed.expert_ids;
      r.weights = bits(routed.expert_weights);
      out.blocks.push_back(std::move(r));
    }
    std::vector<PromptLogprobs> prompt_logprobs;  // no sequence asks for them here
    await(loop_,
          [&](Completion done) { executor_->sample(batch, seqs, out.next, out.logprobs, prompt_logprobs, done); });
    return out;
  }

  CudaExecutor& executor() { return *executor_; }

 private:
  std::shared_ptr<const DeviceModel> model_;
  EventLoop& loop_;
  std::unique_ptr<CudaExecutor> executor_;
  std::vector<std::vector<std::int32_t>> tables_;
  std::vector<std::int32_t> next_pos_;
};

bool same_bits(const std::vector<kernels::TokenLogprobs>& a, const std::vector<kernels::TokenLogprobs>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].token != b[i].token || a[i].top.size() != b[i].top.size()) return false;
    if (std::memcmp(&a[i].logprob, &b[i].logprob, 4) != 0) return false;
    for (std::size_t j = 0; j < a[i].top.size(); ++j)
      if (a[i].top[j].first != b[i].top[j].first || std::memcmp(&a[i].top[j].second, &b[i].top[j].second, 4) != 0)
        return false;
  }
  return true;
}

// Runs everywhere: the buckets are the powers of two up to 256.
TEST(DecodeGraphBuckets, PadToTheNextPowerOfTwoUpTo256) {
  EXPECT_EQ(DecodeGraphs::bucket(0), 0);
  EXPECT_EQ(DecodeGraphs::bucket(1), 1);
  EXPECT_EQ(DecodeGraphs::bucket(2), 2);
  EXPECT_EQ(DecodeGraphs::bucket(3), 4);
  EXPECT_EQ(DecodeGraphs::bucket(8), 8);
  EXPECT_EQ(DecodeGraphs::bucket(9), 16);
  EXPECT_EQ(DecodeGraphs::bucket(31), 32);
  EXPECT_EQ(DecodeGraphs::bucket(129), 256);
  EXPECT_EQ(DecodeGraphs::bucket(256), 256);
  EXPECT_EQ(DecodeGraphs::bucket(257), 0);
}

// DecodeGraphs on its own, over a body of one memset: warm-up, one capture, replays that
// really run; and a body that cannot be captured (it synchronises its stream) runs eagerly
// every time instead of failing.
class DecodeGraphsOnAStream : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&word_, 4), cudaSuccess);
  }
  void TearDown() override {
    if (word_ != nullptr) cudaFree(word_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::uint32_t read() {
    std::uint32_t v = 0;
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(&v, word_, 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  // On the test's stream: a non-blocking stream is not ordered after the legacy stream.
  void clear() { ASSERT_EQ(cudaMemsetAsync(word_, 0, 4, stream_), cudaSuccess); }
  cudaStream_t stream_ = nullptr;
  void* word_ = nullptr;
};

Status cuda_status(cudaError_t err) {
  return err == cudaSuccess ? Status::Ok() : Status::Error(cudaGetErrorString(err));
}

TEST_F(DecodeGraphsOnAStream, CapturesOnceAndReplays) {
  DecodeGraphs graphs(true, 0);
  auto body = [&] { return cuda_status(cudaMemsetAsync(word_, 7, 4, stream_)); };
  for (int run = 0; run < 4; ++run) {
    clear();
    ASSERT_TRUE(graphs.run({0, 8, false}, stream_, body).ok()) << "run " << run;
    EXPECT_EQ(read(), 0x07070707u) << "run " << run;
  }
  const CudaGraphStats s = graphs.stats();
  EXPECT_EQ(s.warmups, 1);
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.replays, 3);
  EXPECT_EQ(s.fallbacks, 0);
  // Another key is another graph.
  ASSERT_TRUE(graphs.run({1, 8, false}, stream_, body).ok());
  EXPECT_EQ(graphs.stats().warmups, 2);
}

// What the executor does at start-up: prepare() warms up and captures without a replay, and
// run() then replays from the first call; a shape whose capture fails stays eager.
TEST_F(DecodeGraphsOnAStream, PrepareCapturesSoThatRunOnlyReplays) {
  DecodeGraphs graphs(true, 0);
  int calls = 0;
  auto body = [&] {
    ++calls;
    return cuda_status(cudaMemsetAsync(word_, 9, 4, stream_));
  };
  clear();
  ASSERT_TRUE(graphs.prepare({2, 16, true}, stream_, body).ok());
  EXPECT_EQ(read(), 0x09090909u) << "the warm-up runs the body";
  EXPECT_EQ(calls, 2) << "one warm-up, one capture";
  CudaGraphStats s = graphs.stats();
  EXPECT_EQ(s.warmups, 1);
  EXPECT_EQ(s.captures, 1);
  EXPECT_EQ(s.replays, 0);
  for (int run = 0; run < 2; ++run) {
    clear();
    ASSERT_TRUE(graphs.run({2, 16, true}, stream_, body).ok());
    EXPECT_EQ(read(), 0x09090909u) << "run " << run;
  }
  EXPECT_EQ(calls, 2) << "serving replays, it never runs the body";
  s = graphs.stats();
  EXPECT_EQ(s.replays, 2);
  EXPECT_EQ(s.fallbacks, 0);
  // Preparing again changes nothing.
  ASSERT_TRUE(graphs.prepare({2, 16, true}, stream_, body).ok());
  EXPECT_EQ(graphs.stats().captures, 1);

  auto uncapturable = [&] {
    SY_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(word_, 3, 4, stream_)));
    return cuda_status(cudaStreamSynchronize(stream_));
  };
  ASSERT_TRUE(graphs.prepare({0, 1, false}, stream_, uncapturable).ok());
  EXPECT_EQ(graphs.stats().fallbacks, 1);
  clear();
  ASSERT_TRUE(graphs.run({0, 1, false}, stream_, uncapturable).ok());
  EXPECT_EQ(read(), 0x03030303u) << "a shape that could not be captured runs eagerly";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(DecodeGraphsOnAStream, AFailedCaptureRunsEagerlyFromThenOn) {
  DecodeGraphs graphs(true, 0);
  // Synchronising a capturing stream is not capturable (cudaErrorStreamCaptureUnsupported).
  auto body = [&] {
    SY_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(word_, 5, 4, stream_)));
    return cuda_status(cudaStreamSynchronize(stream_));
  };
  for (int run = 0; run < 3; ++run) {
    clear();
    const Status status = graphs.run({0, 4, false}, stream_, body);
    ASSERT_TRUE(status.ok()) << "run " << run << ": " << status.message();
    EXPECT_EQ(read(), 0x05050505u) << "run " << run;
  }
  const CudaGraphStats s = graphs.stats();
  EXPECT_EQ(s.fallbacks, 1);
  EXPECT_EQ(s.captures, 0);
  EXPECT_EQ(s.replays, 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed capture's error must not linger";
}

TEST_F(DecodeGraphsOnAStream, DisabledRunsTheBodyEveryTime) {
  DecodeGraphs graphs(false, 0);
  int calls = 0;
  for (int run = 0; run < 3; ++run)
    ASSERT_TRUE(graphs.run({0, 1, false}, stream_, [&] {
                        ++calls;
                        return cuda_status(cudaMemsetAsync(word_, 1, 4, stream_));
                      }).ok());
  EXPECT_EQ(calls, 3);
  const CudaGraphStats s = graphs.stats();
  EXPECT_EQ(s.warmups + s.captures + s.replays + s.fallbacks, 0);
}

struct ModelCase {
  Arch arch;
  kernels::DType dtype;
};

class CudaGraphs : public ::testing::TestWithParam<ModelCase> {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    dir_ = fs::temp_directory_path() / ("sy_test_cuda_graphs_" + arch_name(GetParam().arch) + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(dir_);
    const ModelConfig config = preset_config(GetParam().arch, ModelPreset::Tiny, GetParam().dtype);
    ASSERT_TRUE(write_random_model(config, 5, dir_).ok());
    auto w = ModelWeights::load(dir_);
    ASSERT_TRUE(w.ok()) << w.status().message();
    DeviceModelNeeds needs;
    needs.attention = true;
    needs.who = "gpu 0 (test)";
    auto m = DeviceModel::upload(**w, 0, needs);
    ASSERT_TRUE(m.ok()) << m.status().message();
    model_ = *m;
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
  std::shared_ptr<const DeviceModel> model_;
};

TEST_P(CudaGraphs, ReplaysGiveTheEagerPaddedBitsAndAreReused) {
  WallClockEventLoop loop;
  CudaExecutorOptions with_graphs;
  with_graphs.cuda_graphs = true;
  CudaExecutorOptions padded_eager;
  padded_eager.cuda_graphs = false;
  padded_eager.pad_decode = true;
  padded_eager.device = 1;
  Driver graphs(model_, loop, with_graphs), eager(model_, loop, padded_eager);
  const ModelConfig& c = model_->config();

  // The prompts (2..5 tokens each): one mixed batch, eager and unpadded in both.
  std::vector<std::pair<std::int32_t, std::int32_t>> prompt_rows;
  for (std::int32_t s = 0; s < Driver::kSequences; ++s)
    for (std::int32_t t = 0; t < 2 + s % 4; ++t) prompt_rows.emplace_back(s, (s * 31 + t * 7) % c.vocab_size);
  const Driver::Step pa = graphs.step(prompt_rows), pb = eager.step(prompt_rows);
  EXPECT_EQ(pa.next, pb.next);

  // Each batch size three times, every time a replay of a graph captured at start-up.
  // Buckets 1, 4, 8, 16, 32: on an edge (1, 8), inside (3, 31) and just past one (9).
  const std::vector<std::int32_t> sizes = {1, 3, 8, 9, 31};
  std::int32_t step_no = 0;
  for (const std::int32_t m : sizes) {
    for (int rep = 0; rep < 3; ++rep, ++step_no) {
      std::vector<std::pair<std::int32_t, std::int32_t>> rows;
      for (std::int32_t s = 0; s < m; ++s) rows.emplace_back(s, (s * 13 + step_no * 5 + 1) % c.vocab_size);
      const Driver::Step a = graphs.step(rows), b = eager.step(rows);
      const std::string what = std::to_string(m) + " rows, run " + std::to_string(rep + 1);
      ASSERT_EQ(a.blocks.size(), b.blocks.size());
      for (std::size_t block = 0; block < a.blocks.size(); ++block)
        EXPECT_TRUE(a.blocks[block] == b.blocks[block]) << what << ": block " << block << " differs";
      EXPECT_EQ(a.next, b.next) << what;
      EXPECT_TRUE(same_bits(a.logprobs, b.logprobs)) << what << ": the logits differ";
      ASSERT_EQ(static_cast<std::int32_t>(a.next.size()), m);
    }
  }

  const CudaGraphStats s = graphs.executor().graph_stats();
  // Prepared at start-up: every bucket of every block, twice where a shared expert may run
  // inline or apart.
  std::int64_t buckets = 0;
  for (std::int32_t b = 1; b <= DecodeGraphs::kMaxBucket; b *= 2) ++buckets;
  std::int64_t prepared = 0;
  for (std::int32_t block = 0; block < c.num_layers; ++block)
    prepared += buckets * (c.is_sparse(block) && !model_->layer(block).shared_expert.empty() ? 2 : 1);
  EXPECT_EQ(s.fallbacks, 0) << "a capture failed: see the warning above";
  EXPECT_EQ(s.warmups, prepared);
  EXPECT_EQ(s.captures, prepared);
  EXPECT_EQ(s.replays, 3 * static_cast<std::int64_t>(sizes.size()) * c.num_layers)
      << "every decode execution replays a graph captured at start-up";
  const CudaGraphStats none = eager.executor().graph_stats();
  EXPECT_EQ(none.captures + none.replays + none.warmups, 0);
}

// Padding must not change what the real rows compute beyond GEMM rounding (cuBLAS may pick
// other kernels for other row counts, so bits may differ): greedy tokens of the graphs match
// plain eager decode's on an f32 model, and log-probabilities agree closely.
TEST_P(CudaGraphs, PaddedDecodeMatchesUnpaddedEagerDecode) {
  if (GetParam().dtype != kernels::DType::F32) GTEST_SKIP() << "bf16 rounding may flip near-ties";
  WallClockEventLoop loop;
  CudaExecutorOptions plain;
  plain.cuda_graphs = false;
  plain.device = 1;
  Driver graphs(model_, loop, CudaExecutorOptions{}), eager(model_, loop, plain);
  const ModelConfig& c = model_->config();
  std::vector<std::pair<std::int32_t, std::int32_t>> prompt_rows;
  for (std::int32_t s = 0; s < Driver::kSequences; ++s)
    for (std::int32_t t = 0; t < 3; ++t) prompt_rows.emplace_back(s, (s * 17 + t) % c.vocab_size);
  graphs.step(prompt_rows);
  eager.step(prompt_rows);
  for (const std::int32_t m : {5, 5, 5, 31, 31, 31}) {
    std::vector<std::pair<std::int32_t, std::int32_t>> rows;
    for (std::int32_t s = 0; s < m; ++s) rows.emplace_back(s, (s * 3 + m) % c.vocab_size);
    const Driver::Step a = graphs.step(rows), b = eager.step(rows);
    EXPECT_EQ(a.next, b.next) << m << " rows";
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
    for (std::size_t i = 0; i < a.logprobs.size(); ++i) EXPECT_NEAR(a.logprobs[i].logprob, b.logprobs[i].logprob, 1e-3);
  }
  EXPECT_GT(graphs.executor().graph_stats().replays, 0);
}

// Where NCCL links carry rows (CudaExecutorOptions::preload_kernels), an executor, once made,
// has every kernel of kernels/cuda loaded (cuFuncIsLoaded), so that no first launch amid an
// NCCL transfer loads one lazily. Eager executor (no graphs): its construction launches nothing.
TEST_P(CudaGraphs, AnExecutorThatPreloadsHasEveryKernelLoaded) {
  WallClockEventLoop loop;
  CudaExecutorOptions o;
  o.cuda_graphs = false;
  o.attention_rank = true;
  o.kv_pages = 4;
  o.preload_kernels = true;
  auto executor = std::make_unique<CudaExecutor>(model_, o, loop);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  for (const kernels::KernelEntry& k : kernels::registered_kernels()) {
    const auto loaded = kernels::kernel_loaded(k.symbol);
    ASSERT_TRUE(loaded.ok()) << k.name << ": " << loaded.status().message();
    EXPECT_TRUE(*loaded) << k.name << " is not loaded after the executor was made";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CudaGraphs,
                         ::testing::Values(ModelCase{Arch::Mixtral, kernels::DType::BF16},
                                           ModelCase{Arch::Qwen2Moe, kernels::DType::BF16},
                                           ModelCase{Arch::Qwen3Moe, kernels::DType::F32}),
                         [](const auto& p) {
                           return arch_name(p.param.arch) + "_" + std::string(kernels::dtype_name(p.param.dtype));
                         });

}  // namespace
}  // namespace sy
