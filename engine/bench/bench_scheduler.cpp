// Cost of one scheduling decision of each scheduler with 64 blocks × 64 experts of queued
// tokens (AMoE reports the decision as a small fraction of a step; we aim for microseconds).
#include <benchmark/benchmark.h>

#include <random>

#include "engine/runtime/scheduler.h"

namespace {

sy::QueueGrid random_grid(std::int32_t blocks, std::int32_t experts, double occupancy) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  std::uniform_int_distribution<std::int64_t> tokens(1, 256);
  std::vector<std::int64_t> cells(static_cast<std::size_t>(blocks) * static_cast<std::size_t>(experts));
  for (auto& t : cells) t = u(rng) < occupancy ? tokens(rng) : 0;
  return sy::QueueGrid::from(blocks, experts, std::move(cells));
}

void BM_Pick(benchmark::State& state, const char* name) {
  auto scheduler = std::move(sy::make_scheduler({name, 3, 0.5})).value();
  const sy::QueueGrid g = random_grid(static_cast<std::int32_t>(state.range(0)),
                                      static_cast<std::int32_t>(state.range(1)), 0.5);
  for (auto _ : state) benchmark::DoNotOptimize(scheduler->pick(g));
  state.counters["queues"] = static_cast<double>(state.range(0) * state.range(1));
}

}  // namespace

BENCHMARK_CAPTURE(BM_Pick, defrag, "defrag")->Args({64, 64})->Args({32, 8})->Args({8, 8});
BENCHMARK_CAPTURE(BM_Pick, mtfs, "mtfs")->Args({64, 64})->Args({32, 8})->Args({8, 8});
BENCHMARK_CAPTURE(BM_Pick, flfs, "flfs")->Args({64, 64})->Args({32, 8})->Args({8, 8});
BENCHMARK_CAPTURE(BM_Pick, tail, "tail")->Args({64, 64})->Args({32, 8})->Args({8, 8});
BENCHMARK_MAIN();
