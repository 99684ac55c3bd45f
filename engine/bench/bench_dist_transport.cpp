// What a shipment costs between two processes on this host: the cross-process transport
// (ZeroMQ/TCP, header then payload, decoded into host activations on the receiver's event loop)
// against the in-process path (LoopTransport: the handle is moved) for the same shipment.
// Latency: half the round trip of one shipment bounced back by the other rank. Bandwidth: a
// stream of shipments, timed until the other rank has received the last one. Run it alone
// (it forks its second rank) or under `mpirun -np 2`. A benchmark, not a test.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/cpu/host_activation_ops.h"
#include "engine/dist/bootstrap.h"
#include "engine/dist/process_links.h"
#include "engine/dist/zmq_transport.h"
#include "engine/runtime/wall_clock_event_loop.h"

namespace {

using namespace sy;
using Clock = std::chrono::steady_clock;

constexpr std::int32_t kPing = 0;    // group tag: bounce it back
constexpr std::int32_t kStream = 1;  // count it; answer the last one
constexpr std::int32_t kStop = 2;

Shipment make_shipment(HostActivationOps& ops, std::int64_t rows, std::int64_t width, std::int32_t group,
                       std::int32_t block) {
  Shipment s{0, 1, LayerKind::Expert, block, group, {}};
  TokenBatch b;
  b.layer = LayerId::expert(0, 0);
  b.columns = kExpertColumns;
  for (std::int64_t r = 0; r < rows; ++r)
    b.row.push_back({.request = r, .rank = 0, .slot = static_cast<std::int32_t>(r), .weight = 0.5f});
  if (rows > 0) {
    b.hidden = ops.allocate(rows, width);
    std::fill_n(HostActivationOps::data(b.hidden), rows * width, 1.0f);
  }
  s.batches.push_back(std::move(b));
  return s;
}

// One-process reference: the same shipment through a LoopTransport on a wall-clock loop.
double in_process_ns(HostActivationOps& ops, std::int64_t rows, std::int64_t width, int reps) {
  WallClockEventLoop loop;
  LoopTransport t(loop, 2, width * 4, LinkModel{}, nullptr);
  int got = 0;
  t.set_receiver(1, {{}, [&](Shipment&&) { ++got; }});
  const auto start = Clock::now();
  for (int i = 0; i < reps; ++i) {
    t.send(make_shipment(ops, rows, width, kPing, 0));
    loop.run();
  }
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()) / reps;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cross-process shipment latency and bandwidth (cpu backend, this host)"};
  std::vector<std::int64_t> rows{1, 16, 128, 1024};
  std::int64_t width = 4096;
  int reps = 50;
  app.add_option("--rows", rows, "Rows per shipment (several)")->capture_default_str();
  app.add_option("--width", width, "Floats per row (the model's hidden size)")->capture_default_str();
  app.add_option("--reps", reps, "Round trips and stream length per size")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto env = dist::RankEnvironment::from_process();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().message().c_str());
    return 1;
  }
  pid_t child = -1;
  if (!env->distributed()) {
    // Alone: fork the second rank before any thread exists.
    const std::string port = std::to_string(29700 + ::getpid() % 200);
    child = ::fork();
    ::setenv("RANK", child == 0 ? "1" : "0", 1);
    ::setenv("WORLD_SIZE", "2", 1);
    ::setenv("MASTER_PORT", port.c_str(), 1);
    env = dist::RankEnvironment::from_process();
  }
  if (env->world != 2) {
    std::fprintf(stderr, "bench_dist_transport runs two ranks, not %d\n", env->world);
    return 1;
  }
  auto rendezvous = dist::bootstrap(*env, dist::RunIdentity{"bench", 0, "bench", 0, "", "bench", 0});
  if (!rendezvous.ok()) {
    std::fprintf(stderr, "%s\n", rendezvous.status().message().c_str());
    return 1;
  }
  const std::int32_t me = env->rank;
  dist::ProcessLinks links(std::move(*rendezvous), me);
  WallClockEventLoop loop;
  dist::ZmqTransport transport(loop, 2, width * 4, LinkModel{}, nullptr, {0, 1}, links);
  HostActivationOps ops;

  if (me == 1) {
    std::int64_t streamed = 0;
    bool stop = false;
    transport.set_receiver(1, {{}, [&](Shipment&& s) {
                                 if (s.group == kStop) {
                                   stop = true;
                                 } else if (s.group == kPing) {
                                   s.src = 1;
                                   s.dst = 0;
                                   transport.send(std::move(s));
                                 } else if (++streamed == s.block) {  // block carries the stream length
                                   streamed = 0;
                                   transport.send(Shipment{1, 0, LayerKind::Expert, 0, kStream, {}});
                                 }
                               }});
    links.start();
    loop.begin_outside_work();
    loop.run([&] { return stop; });
    loop.end_outside_work();
    links.stop();
    return 0;
  }

  bool answered = false;
  transport.set_receiver(0, {{}, [&](Shipment&&) { answered = true; }});
  links.start();
  loop.begin_outside_work();
  auto wait_answer = [&] {
    answered = false;
    loop.run([&] { return answered; });
  };
  std::printf("shipment of R rows x %lld floats (+ metadata), one way; in-process = LoopTransport on one loop\n",
              static_cast<long long>(width));
  std::printf("%8s %12s %14s %14s %14s %12s\n", "rows", "bytes", "latency us", "in-process us", "bandwidth MB/s",
              "ratio");
  for (const std::int64_t r : rows) {
    const std::int64_t bytes = r * width * 4;
    for (int i = 0; i < 5; ++i) {  // warm-up: connections, buffers
      transport.send(make_shipment(ops, r, width, kPing, 0));
      wait_answer();
    }
    auto start = Clock::now();
    for (int i = 0; i < reps; ++i) {
      transport.send(make_shipment(ops, r, width, kPing, 0));
      wait_answer();
    }
    const double one_way_ns =
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count()) / reps /
        2;
    start = Clock::now();
    for (int i = 0; i < reps; ++i) transport.send(make_shipment(ops, r, width, kStream, reps));
    wait_answer();
    const double stream_s = std::chrono::duration<double>(Clock::now() - start).count();
    const double local_ns = in_process_ns(ops, r, width, reps);
    std::printf("%8lld %12lld %14.1f %14.2f %14.1f %11.0fx\n", static_cast<long long>(r),
                static_cast<long long>(bytes), one_way_ns / 1e3, local_ns / 1e3,
                static_cast<double>(bytes) * reps / stream_s / 1e6, one_way_ns / local_ns);
  }
  transport.send(Shipment{0, 1, LayerKind::Expert, 0, kStop, {}});
  loop.end_outside_work();
  links.stop();
  if (child > 0) {
    int status = 0;
    ::waitpid(child, &status, 0);
  }
  return 0;
}
