// The engine's run metadata (the stream's `meta` topic, get_state's `state`, a trace's META
// table): model shape, devices, expert placement, policy, admission and recording state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace sy::console {

// placement[block][expert] = devices holding a replica of that expert.
using Placement = std::vector<std::vector<std::vector<std::int32_t>>>;

struct DeviceInfo {
  std::int32_t index = 0;
  std::string name;
  std::int32_t rank = -1;  // attention DP rank; -1 for an expert-only device
  std::int32_t node = 0;
  std::int32_t process = 0;  // the rank of the process that runs it (0 in one process)
};

// One process of a deployment spread over several (meta.processes).
struct ProcessInfo {
  std::int32_t rank = 0;
  bool dead = false;
  std::string reason;  // why it was found dead
  std::optional<double> clock_offset_us;  // its clock minus rank 0's, once measured
  std::optional<double> clock_error_us;   // bound on the residual error of that offset
};

struct PolicyInfo {
  std::string name;       // async, pingpong, sync, ...
  std::string scheduler;  // defrag, mtfs, flfs, tail (async only)
  std::int32_t lookahead = -1;  // -1: not reported (0 is a lookahead the engine accepts)
  double decay = 0;             // 0: not reported (the engine's decay is in (0, 1])
  std::int32_t microbatches = 0;
  std::int32_t expert_chunks = 0;  // findep's r2
  std::string order;               // findep's shared-expert order: asas, aass
  std::string barrier;             // sync's barrier: collective, ideal (empty: not reported)
  bool adaptive = false;           // the `adaptive` policy chose `name` and may switch again

  // "async/defrag (lookahead 3, decay 0.5)", "pingpong (m=2)", "findep (r1=2, r2=3, ASAS)",
  // "sync (ideal barrier)"; under the adaptive policy "adaptive, now sync".
  std::string describe() const;
};

struct WorkloadInfo {
  double rate = 0;
  std::string skew;
  std::string length_class;
};

// meta.rebalance: the periodic expert rebalancer's setting.
struct RebalanceSetting {
  double interval_s = 0;
  double threshold = 0;
  std::string algorithm;
};

struct RunMeta {
  int schema_version = 0;
  std::uint64_t run_id = 0;
  std::string clock;  // virtual | wall
  std::int64_t wall_origin_unix_ns = 0;
  double pace = 0;
  std::int64_t now_ns = 0;
  std::string backend;
  std::string hardware;  // empty when null
  std::string model_name;
  std::string arch;
  std::int32_t blocks = 0;
  std::int32_t experts = 0;
  std::int32_t top_k = 0;
  std::int32_t hidden_size = 0;
  std::vector<DeviceInfo> devices;
  Placement placement;
  PolicyInfo policy;
  bool admission_paused = false;
  // What shapes each attention rank's batches (meta's "batching"; 0 when an older engine sent none).
  std::int32_t max_batch_per_rank = 0;
  std::int32_t max_num_batched_tokens = 0;  // chunked prefill's budget; 0: prompts fed whole
  std::optional<std::string> recording_path;
  std::int64_t recording_since_ns = 0;
  std::optional<WorkloadInfo> workload;
  std::optional<RebalanceSetting> rebalance;  // unset: periodic rebalancing off
  std::int64_t row_bytes = 0;
  std::vector<ProcessInfo> processes;  // empty in one process
  std::string json;  // the object as received

  // Device name by index ("dev N" when the metadata does not name it).
  std::string device_name(std::int32_t index) const;
  const DeviceInfo* device(std::int32_t index) const;
  // The process running a device, when the run spans several; null otherwise.
  const ProcessInfo* process_of(std::int32_t device_index) const;
};

// Parses one meta object (JSON text). Missing optional keys keep their defaults; a key of the
// wrong type is an error naming the key.
StatusOr<RunMeta> parse_run_meta(const std::string& json_object);

}  // namespace sy::console
