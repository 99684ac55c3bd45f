// ProcessLinks' heartbeats between two ranks of this process: a receiver thread busy with a
// backlog of messages (on the cuda backend each payload's rows are copied to the GPU there)
// still beats, so its peer does not take it for dead.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/dist/control_messages.h"
#include "engine/dist/process_links.h"
#include "tests/dist/two_ranks.h"

namespace sy::dist {
namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
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

// A handler that waits long (an NCCL receive on the cuda backend) and pumps meanwhile: this
// rank keeps beating, an urgent message is handled amid the wait, and the others wait, in
// order, for the handler to return.
TEST(ProcessLinks, AWaitThatPumpsKeepsBeatingAndKeepsOrder) {
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  std::atomic<bool> urgent_seen{false}, urgent_during_wait{false}, waiting{false};
  std::vector<int> order;  // receiver thread only until the end
  zero.on(MessageType::Payload, [&](ByteReader& r) {
    std::uint8_t n = 0;
    (void)r.get(n);
    order.push_back(n);
    if (n != 0) return;
    waiting = true;
    // 1.2 s, three times the 400 ms after which rank 1 takes rank 0 for dead.
    for (const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
         std::chrono::steady_clock::now() < end;) {
      zero.pump();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    urgent_during_wait = urgent_seen.load();
    waiting = false;
  });
  zero.on(MessageType::LinkRefused, [&](ByteReader&) { urgent_seen = true; }, /*urgent=*/true);
  std::atomic<int> zero_lost{0}, one_lost{0};
  const std::int64_t timeout = 400'000'000, startup = 10'000'000'000;
  zero.watch({1}, timeout, startup, [&](std::int32_t, double) { ++one_lost; }, now_ns);
  one.watch({0}, timeout, startup, [&](std::int32_t, double) { ++zero_lost; }, now_ns);
  zero.start();
  one.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto payload = [](int n) {
    std::string m(1, static_cast<char>(MessageType::Payload));
    m += static_cast<char>(n);
    return m;
  };
  one.send(0, payload(0));
  for (int i = 0; i < 100 && !waiting.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(waiting.load());
  for (int n = 1; n <= 5; ++n) one.send(0, payload(n));
  one.send(0, std::string(1, static_cast<char>(MessageType::LinkRefused)));
  for (int n = 6; n <= 9; ++n) one.send(0, payload(n));
  for (int i = 0; i < 400 && (waiting.load() || order.size() < 10); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  one.stop();
  zero.stop();
  EXPECT_EQ(zero_lost.load(), 0) << "rank 0 sent no heartbeat while it waited";
  EXPECT_EQ(one_lost.load(), 0) << "rank 1's heartbeats were not taken in during the wait";
  EXPECT_TRUE(urgent_during_wait.load()) << "the urgent message waited for the handler";
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

// A wait that pumps learns, within the heartbeat timeout, that its peer fell silent (the peer
// it waits for died), before the handler returns.
TEST(ProcessLinks, AWaitThatPumpsFindsASilentPeerLost) {
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  std::atomic<bool> lost{false};
  std::atomic<double> lost_after_ms{-1};
  std::atomic<bool> waiting{false};
  zero.on(MessageType::Payload, [&](ByteReader&) {
    waiting = true;
    const auto start = std::chrono::steady_clock::now();
    while (!lost.load() && std::chrono::steady_clock::now() < start + std::chrono::seconds(5)) {
      zero.pump();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    lost_after_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    waiting = false;
  });
  const std::int64_t timeout = 400'000'000, startup = 10'000'000'000;
  zero.watch({1}, timeout, startup, [&](std::int32_t rank, double) { lost = rank == 1; }, now_ns);
  one.watch({0}, timeout, startup, [](std::int32_t, double) {}, now_ns);
  zero.start();
  one.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  one.send(0, std::string(1, static_cast<char>(MessageType::Payload)));
  for (int i = 0; i < 100 && !waiting.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  one.stop();  // rank 1 falls silent, as a SIGKILL leaves it
  for (int i = 0; i < 1000 && waiting.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  zero.stop();
  EXPECT_TRUE(lost.load());
  EXPECT_GT(lost_after_ms.load(), 300.0);
  EXPECT_LT(lost_after_ms.load(), 2000.0);
}

// The next deployment on the same links (bench serves one per policy): the beats rank 0 sent
// while rank 1 had already stopped receiving wait in rank 1's socket. They belong to the run
// that ended, so rank 1 still gives rank 0, busy building its next deployment, the startup
// time for its first beat, not the heartbeat timeout counted from those old beats.
TEST(ProcessLinks, BeatsLeftFromThePreviousRunDoNotStartTheNextRunsTimeout) {
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  std::atomic<int> zero_lost{0}, one_lost{0};
  const std::int64_t timeout = 400'000'000, startup = 10'000'000'000;
  zero.watch({1}, timeout, startup, [&](std::int32_t, double) { ++one_lost; }, now_ns, 1);
  one.watch({0}, timeout, startup, [&](std::int32_t, double) { ++zero_lost; }, now_ns, 1);
  zero.start();
  one.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  one.stop();  // rank 1's run ended first; rank 0 beats on for a while
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  zero.stop();
  // Run 2: rank 1 is back at once, rank 0 takes more than twice the heartbeat timeout.
  one.watch({0}, timeout, startup, [&](std::int32_t, double) { ++zero_lost; }, now_ns, 2);
  one.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(zero_lost.load(), 0) << "rank 1 timed rank 0's silence from beats of the previous run";
  zero.watch({1}, timeout, startup, [&](std::int32_t, double) { ++one_lost; }, now_ns, 2);
  zero.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  one.stop();
  zero.stop();
  EXPECT_EQ(zero_lost.load(), 0);
  EXPECT_EQ(one_lost.load(), 0);
  ProcessLinks::Offset offset;
  EXPECT_TRUE(one.clock_offset(0, offset)) << "run 2's beats were not taken";
}

// A peer that departed (rank 0's Shutdown arrived) falls silent without being lost, however
// long this rank then takes to stop its receiver; another peer's silence still counts.
TEST(ProcessLinks, ADepartedPeersSilenceIsNoLoss) {
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  std::atomic<int> zero_lost{0};
  one.on(MessageType::Shutdown, [&](ByteReader&) { one.departed(0); });
  const std::int64_t timeout = 400'000'000, startup = 10'000'000'000;
  zero.watch({1}, timeout, startup, [](std::int32_t, double) {}, now_ns);
  one.watch({0}, timeout, startup, [&](std::int32_t, double) { ++zero_lost; }, now_ns);
  zero.start();
  one.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  zero.send(1, std::string(1, static_cast<char>(MessageType::Shutdown)));
  zero.stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  one.stop();
  EXPECT_EQ(zero_lost.load(), 0) << "rank 0 ended the run and was then declared dead";
}

// A heartbeat whose times cannot be (an echo of a send still to come, a round trip shorter than
// the peer's own turnaround, times no clock gives) keeps the peer alive but gives no clock
// offset: the offset it would give moves every relayed event of that rank by garbage (and its
// arithmetic overflowed on extreme times).
TEST(ProcessLinks, HeartbeatsWithImpossibleTimesGiveNoClockOffset) {
  std::vector<Rendezvous> rv = two_ranks();
  ProcessLinks zero(std::move(rv[0]), 0), one(std::move(rv[1]), 1);
  std::atomic<int> lost{0};
  const std::int64_t timeout = 5'000'000'000, startup = 10'000'000'000;
  zero.watch({1}, timeout, startup, [&](std::int32_t, double) { ++lost; }, now_ns, 1);
  zero.start();  // rank 1 sends only what this test crafts
  const std::int64_t now = now_ns();
  one.send(0, encode(Heartbeat{1, 1, now, now + 60'000'000'000, now}));            // echo of a later send
  one.send(0, encode(Heartbeat{1, 1, now - 2'000'000, now - 1'000'000, now}));    // turnaround after its send
  one.send(0, encode(Heartbeat{1, 1, now, now - 1'000'000'000, std::int64_t{1} << 62}));  // no clock's time
  std::string extreme = encode(Heartbeat{1, 1, 0, 0, 0});
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  std::memcpy(extreme.data() + 1 + 4 + 4 + 8, &lowest, sizeof lowest);
  one.send(0, extreme);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ProcessLinks::Offset offset;
  EXPECT_FALSE(zero.clock_offset(1, offset)) << "offset " << offset.offset_ns << " from an impossible beat";
  // A beat whose times can be is taken.
  const std::int64_t t = now_ns();
  one.send(0, encode(Heartbeat{1, 1, t - 1'000'000, t - 3'000'000, t - 2'000'000}));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!zero.clock_offset(1, offset) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  zero.stop();
  EXPECT_TRUE(zero.clock_offset(1, offset));
  EXPECT_EQ(lost.load(), 0);
}

}  // namespace
}  // namespace sy::dist
