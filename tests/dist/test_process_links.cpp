// ProcessLinks' heartbeats between two ranks of this process: a receiver thread busy with a
// backlog of messages (on the cuda backend each payload's rows are copied to the GPU there)
// still beats, so its peer does not take it for dead.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/process_links.h"

namespace sy::dist {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Two ranks' rendezvous as the bootstrap leaves them: a bound data socket each, both endpoints.
std::vector<Rendezvous> two_ranks() {
  std::vector<Rendezvous> out(2);
  std::vector<std::string> endpoints;
  for (Rendezvous& r : out) {
    r.context = std::make_unique<zmq::context_t>(1);
    r.data = zmq::socket_t(*r.context, zmq::socket_type::pull);
    r.data.bind("tcp://127.0.0.1:*");
    endpoints.push_back(r.data.get(zmq::sockopt::last_endpoint));
  }
  for (Rendezvous& r : out) r.endpoints = endpoints;
  return out;
}

TEST(ProcessLinks, AReceiverBusyWithABacklogStillBeats) {
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  // Rank 0 takes 50 ms over each payload: a backlog of 20 keeps its receiver thread busy for a
  // second, more than twice the 400 ms after which rank 1 takes it for dead.
  std::atomic<int> handled{0};
  zero.on(MessageType::Payload, [&](ByteReader&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ++handled;
  });
  std::atomic<int> zero_lost{0}, one_lost{0};
  const std::int64_t timeout = 400'000'000, startup = 10'000'000'000;
  zero.watch({1}, timeout, startup, [&](std::int32_t, double) { ++one_lost; }, now_ns);
  one.watch({0}, timeout, startup, [&](std::int32_t, double) { ++zero_lost; }, now_ns);
  zero.start();
  one.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both have heard each other
  const std::string payload(1, static_cast<char>(MessageType::Payload));
  for (int i = 0; i < 20; ++i) one.send(0, payload);
  for (int waited = 0; handled.load() < 20 && waited < 100; ++waited)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(handled.load(), 20);
  EXPECT_EQ(zero_lost.load(), 0) << "rank 0 sent no heartbeat while it worked through its backlog";
  EXPECT_EQ(one_lost.load(), 0) << "rank 1's heartbeats were queued behind the backlog, not missing";
  one.stop();
  zero.stop();
}

}  // namespace
}  // namespace sy::dist
