#include "engine/cuda/device_model.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/util/progress.h"
#include "kernels/cpu/rope.h"
#include "kernels/cuda/device_sync_lock.h"

namespace sy {
namespace {

constexpr std::int64_t kAlign = 256;                // cuBLAS and vector loads like aligned tensors
constexpr std::size_t kStagingBytes = 32ull << 20;  // per pinned staging buffer (two alternate)

std::int64_t aligned(std::int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

Status cuda(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status::Error(what + ": " + cudaGetErrorString(err));
}

std::string gib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

// Every host tensor the needs name, each once (a tied lm_head is the embedding), with its
// place in the device block.
class UploadPlan {
 public:
  std::int64_t add(const void* host, std::int64_t bytes) {
    if (host == nullptr || bytes <= 0) return -1;
    const auto it = offsets_.find(host);
    if (it != offsets_.end()) return it->second;
    const std::int64_t at = total_;
    offsets_.emplace(host, at);
    items_.push_back({host, bytes, at});
    total_ += aligned(bytes);
    return at;
  }
  struct Item {
    const void* host;
    std::int64_t bytes;
    std::int64_t offset;
  };
  const std::vector<Item>& items() const { return items_; }
  std::int64_t total() const { return total_; }

 private:
  std::map<const void*, std::int64_t> offsets_;
  std::vector<Item> items_;
  std::int64_t total_ = 0;
};

std::int64_t bytes_of(const kernels::WeightView& w) {
  return w.numel() * static_cast<std::int64_t>(kernels::dtype_size(w.dtype));
}
std::int64_t bytes_of(const VectorView& v) { return v.size * static_cast<std::int64_t>(kernels::dtype_size(v.dtype)); }

// Walks every tensor the needs name: fn(host view) for matrices, vectors and biases alike.
template <class Matrix, class Vector, class Bias>
void for_each_needed(const ModelWeights& host, const DeviceModelNeeds& needs, Matrix&& matrix, Vector&& vector,
                     Bias&& bias) {
  const ModelConfig& c = host.config();
  if (needs.attention) {
    matrix(host.embed_tokens());
    matrix(host.lm_head());
    vector(host.final_norm());
  }
  for (std::int32_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& w = host.layer(l);
    if (needs.attention) {
      vector(w.input_norm);
      vector(w.post_attention_norm);
      for (const kernels::WeightView* m : {&w.q_proj, &w.k_proj, &w.v_proj, &w.o_proj}) matrix(*m);
      bias(w.q_bias, static_cast<std::int64_t>(c.num_heads) * c.head_dim);
      bias(w.k_bias, static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim);
      bias(w.v_bias, static_cast<std::int64_t>(c.num_kv_heads) * c.head_dim);
      vector(w.q_norm);
      vector(w.k_norm);
      if (!w.sparse) {
        for (const kernels::WeightView* m : {&w.dense_mlp.gate, &w.dense_mlp.up, &w.dense_mlp.down}) matrix(*m);
      } else {
        matrix(w.router);
        if (!w.shared_expert.empty()) {
          for (const kernels::WeightView* m : {&w.shared_expert.gate, &w.shared_expert.up, &w.shared_expert.down})
            matrix(*m);
          matrix(w.shared_expert_gate);
        }
      }
    }
    if (w.sparse && static_cast<std::size_t>(l) < needs.experts.size()) {
      const std::vector<bool>& held = needs.experts[static_cast<std::size_t>(l)];
      for (std::size_t e = 0; e < held.size() && e < w.experts.size(); ++e)
        if (held[e]) {
          matrix(w.experts[e].gate);
          matrix(w.experts[e].up);
          matrix(w.experts[e].down);
        }
    }
  }
}

}  // namespace

std::int64_t DeviceModel::bytes_needed(const ModelWeights& host, const DeviceModelNeeds& needs) {
  UploadPlan plan;
  for_each_needed(
      host, needs, [&](const kernels::WeightView& m) { plan.add(m.data, bytes_of(m)); },
      [&](const VectorView& v) { plan.add(v.data, bytes_of(v)); },
      [&](const float* b, std::int64_t n) { plan.add(b, n * 4); });
  return plan.total() + aligned(static_cast<std::int64_t>(host.config().head_dim / 2) * 4);
}

StatusOr<std::shared_ptr<const DeviceModel>> DeviceModel::upload(const ModelWeights& host, int gpu,
                                                                  const DeviceModelNeeds& needs) {
  const ModelConfig& c = host.config();
  UploadPlan plan;
  for_each_needed(
      host, needs, [&](const kernels::WeightView& m) { plan.add(m.data, bytes_of(m)); },
      [&](const VectorView& v) { plan.add(v.data, bytes_of(v)); },
      [&](const float* b, std::int64_t n) { plan.add(b, n * 4); });
  const kernels::Rope rope = c.rope();
  const std::int64_t freq_at = plan.total();
  const std::int64_t total = freq_at + aligned(static_cast<std::int64_t>(rope.inv_freq().size()) * 4);

  SY_RETURN_IF_ERROR(cuda(cudaSetDevice(gpu), "cudaSetDevice(" + std::to_string(gpu) + ")"));
  std::size_t free_bytes = 0, total_bytes = 0;
  SY_RETURN_IF_ERROR(cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo on gpu " + std::to_string(gpu)));
  const std::int64_t need = total + needs.other_bytes;
  if (need > static_cast<std::int64_t>(free_bytes))
    return Status::Error(needs.who + " does not fit: it needs " + gib(need) + " (weights " + gib(total) +
                         ", KV caches and scratch " + gib(needs.other_bytes) + ") but " +
                         gib(static_cast<std::int64_t>(free_bytes)) + " of " +
                         gib(static_cast<std::int64_t>(total_bytes)) +
                         " are free (fewer experts or KV pages per device, or more GPUs)");

  std::shared_ptr<DeviceModel> model(new DeviceModel());
  model->config_ = c;
  model->gpu_ = gpu;
  model->dtype_ = host.layer(0).q_proj.dtype;
  SY_RETURN_IF_ERROR(cuda(kernels::locked_malloc(&model->memory_,
                                                 static_cast<std::size_t>(std::max<std::int64_t>(total, 1))),
                          "cudaMalloc of " + gib(total) + " of weights on " + needs.who));
  char* base = static_cast<char*>(model->memory_);

  // Two pinned buffers alternate: the CPU fills one (reading the memory-mapped checkpoint)
  // while the other's copy runs.
  cudaStream_t stream = nullptr;
  SY_RETURN_IF_ERROR(cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate"));
  void* staging[2] = {nullptr, nullptr};
  cudaEvent_t copied[2] = {nullptr, nullptr};
  Status status = Status::Ok();
  for (int i = 0; i < 2 && status.ok(); ++i) {
    status = cuda(kernels::locked_malloc_host(&staging[i], kStagingBytes), "cudaMallocHost (pinned staging)");
    if (status.ok()) status = cuda(cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming), "cudaEventCreate");
  }
  {
    Progress progress("weights to gpu " + std::to_string(gpu), total, "B");
    int which = 0;
    std::int64_t done = 0;
    auto copy = [&](const void* src, std::int64_t bytes, std::int64_t offset) {
      for (std::int64_t at = 0; at < bytes && status.ok(); at += static_cast<std::int64_t>(kStagingBytes)) {
        const auto n = static_cast<std::size_t>(std::min<std::int64_t>(bytes - at, kStagingBytes));
        status = cuda(cudaEventSynchronize(copied[which]), "weight upload");  // this buffer's last copy is done
        if (!status.ok()) break;
        std::memcpy(staging[which], static_cast<const char*>(src) + at, n);
        status = cuda(cudaMemcpyAsync(base + offset + at, staging[which], n, cudaMemcpyHostToDevice, stream),
                      "weight upload: cudaMemcpyAsync");
        if (status.ok()) status = cuda(cudaEventRecord(copied[which], stream), "cudaEventRecord");
        which ^= 1;
        done += static_cast<std::int64_t>(n);
        progress.update(done);
      }
    };
    for (const UploadPlan::Item& item : plan.items()) copy(item.host, item.bytes, item.offset);
    copy(rope.inv_freq().data(), static_cast<std::int64_t>(rope.inv_freq().size()) * 4, freq_at);
    if (status.ok()) status = cuda(cudaStreamSynchronize(stream), "weight upload");
  }
  for (int i = 0; i < 2; ++i) {
    if (copied[i] != nullptr) cudaEventDestroy(copied[i]);
    if (staging[i] != nullptr) kernels::locked_free_host(staging[i]);
  }
  cudaStreamDestroy(stream);
  SY_RETURN_IF_ERROR(status);

  // The same views over device memory.
  std::map<const void*, const void*> moved;
  for (const UploadPlan::Item& item : plan.items()) moved.emplace(item.host, base + item.offset);
  auto at = [&](const void* h) -> const void* {
    const auto it = moved.find(h);
    return it == moved.end() ? nullptr : it->second;
  };
  auto matrix = [&](kernels::WeightView v) {
    v.data = at(v.data);
    return v;
  };
  auto vector = [&](VectorView v) {
    v.data = at(v.data);
    return v;
  };
  model->embed_tokens_ = matrix(host.embed_tokens());
  model->lm_head_ = matrix(host.lm_head());
  model->final_norm_ = vector(host.final_norm());
  model->inv_freq_ = reinterpret_cast<const float*>(base + freq_at);
  model->rope_attention_scaling_ = rope.attention_scaling();
  model->layers_.resize(static_cast<std::size_t>(c.num_layers));
  for (std::int32_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& h = host.layer(l);
    LayerWeights& d = model->layers_[static_cast<std::size_t>(l)];
    d.input_norm = vector(h.input_norm);
    d.post_attention_norm = vector(h.post_attention_norm);
    d.q_proj = matrix(h.q_proj);
    d.k_proj = matrix(h.k_proj);
    d.v_proj = matrix(h.v_proj);
    d.o_proj = matrix(h.o_proj);
    d.q_bias = static_cast<const float*>(at(h.q_bias));
    d.k_bias = static_cast<const float*>(at(h.k_bias));
    d.v_bias = static_cast<const float*>(at(h.v_bias));
    d.q_norm = vector(h.q_norm);
    d.k_norm = vector(h.k_norm);
    d.sparse = h.sparse;
    d.dense_mlp = {matrix(h.dense_mlp.gate), matrix(h.dense_mlp.up), matrix(h.dense_mlp.down)};
    d.router = matrix(h.router);
    d.experts.resize(h.experts.size());
    for (std::size_t e = 0; e < h.experts.size(); ++e)
      d.experts[e] = {matrix(h.experts[e].gate), matrix(h.experts[e].up), matrix(h.experts[e].down)};
    d.shared_expert = {matrix(h.shared_expert.gate), matrix(h.shared_expert.up), matrix(h.shared_expert.down)};
    d.shared_expert_gate = matrix(h.shared_expert_gate);
  }
  return std::shared_ptr<const DeviceModel>(std::move(model));
}

DeviceModel::~DeviceModel() {
  cudaSetDevice(gpu_);
  kernels::locked_free(memory_);
}

}  // namespace sy
