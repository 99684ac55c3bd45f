// LinkWait: what a wait on an NCCL link between ranks does for each fault, without a GPU.
#include <gtest/gtest.h>

#include "engine/dist/link_wait.h"

namespace sy::dist {
namespace {

constexpr std::int64_t kMs = 1'000'000;
using Next = LinkWait::Next;

TEST(LinkWait, FinishesWithoutAbortWhenTheOperationCompletes) {
  LinkWait w("NCCL rows to rank 2", 30'000 * kMs, 1'200 * kMs);
  EXPECT_EQ(w.observe(0, false, "", PeerState::Alive).next, Next::Poll);
  const LinkWait::Step s = w.observe(5 * kMs, true, "", PeerState::Alive);
  EXPECT_EQ(s.next, Next::Done);
  EXPECT_FALSE(s.abort);
  EXPECT_FALSE(w.aborted());
}

TEST(LinkWait, DeliveredRowsWinOverAPeerFoundDeadAfterwards) {
  LinkWait w("NCCL rows from rank 1", 30'000 * kMs, 1'200 * kMs);
  EXPECT_EQ(w.observe(kMs, true, "", PeerState::Lost).next, Next::Done);
}

TEST(LinkWait, ADeadPeerAbortsTheLinkOnceAndTakesTheLostRankPath) {
  LinkWait w("NCCL rows to rank 2", 30'000 * kMs, 1'200 * kMs);
  EXPECT_EQ(w.observe(100 * kMs, false, "", PeerState::Alive).next, Next::Poll);
  const LinkWait::Step s = w.observe(700 * kMs, false, "", PeerState::Lost);
  EXPECT_EQ(s.next, Next::PeerLost);
  EXPECT_TRUE(s.abort);
  EXPECT_NE(w.why().find("rank 2"), std::string::npos) << w.why();
  EXPECT_NE(w.why().find("found dead"), std::string::npos) << w.why();
}

TEST(LinkWait, NcclErrorAbortsAtOnceThenWaitsForTheHeartbeatsVerdict) {
  LinkWait w("NCCL rows from rank 3", 30'000 * kMs, 1'200 * kMs);
  LinkWait::Step s = w.observe(10 * kMs, false, "remote process exited or there was a network error", PeerState::Alive);
  EXPECT_EQ(s.next, Next::Poll);
  EXPECT_TRUE(s.abort);
  EXPECT_TRUE(w.aborted());
  // Later polls still report the error; no second abort.
  s = w.observe(500 * kMs, false, "remote process exited or there was a network error", PeerState::Alive);
  EXPECT_EQ(s.next, Next::Poll);
  EXPECT_FALSE(s.abort);
  // The heartbeats then find the peer dead: the lost-rank path, not this rank's failure.
  s = w.observe(900 * kMs, false, "", PeerState::Lost);
  EXPECT_EQ(s.next, Next::PeerLost);
  EXPECT_FALSE(s.abort);
}

TEST(LinkWait, NcclErrorWithALivePeerFailsAfterTheGrace) {
  LinkWait w("NCCL rows from rank 3", 30'000 * kMs, 1'200 * kMs);
  EXPECT_TRUE(w.observe(10 * kMs, false, "unhandled system error", PeerState::Alive).abort);
  EXPECT_EQ(w.observe(1'210 * kMs, false, "unhandled system error", PeerState::Alive).next, Next::Poll);
  const LinkWait::Step s = w.observe(1'211 * kMs, false, "unhandled system error", PeerState::Alive);
  EXPECT_EQ(s.next, Next::Fail);
  EXPECT_FALSE(s.abort);  // already aborted
  EXPECT_NE(w.why().find("unhandled system error"), std::string::npos) << w.why();
  EXPECT_NE(w.why().find("still answered heartbeats"), std::string::npos) << w.why();
}

TEST(LinkWait, ADeadlineWithALivePeerFailsAndAborts) {
  LinkWait w("NCCL rows to rank 1", 2'000 * kMs, 1'200 * kMs);
  EXPECT_EQ(w.observe(2'000 * kMs, false, "", PeerState::Alive).next, Next::Poll);
  const LinkWait::Step s = w.observe(2'001 * kMs, false, "", PeerState::Alive);
  EXPECT_EQ(s.next, Next::Fail);
  EXPECT_TRUE(s.abort);
  EXPECT_NE(w.why().find("within 2 s"), std::string::npos) << w.why();
}

TEST(LinkWait, AJoinPastItsDeadlineNamesThePeerThatNeverJoined) {
  LinkWait w("NCCL link from rank 0 (GPU-a) to rank 1 (GPU-b): waiting for rank 1 to join", 30'000 * kMs,
             1'200 * kMs, /*watched=*/false);
  EXPECT_EQ(w.observe(29'000 * kMs, false, "", PeerState::Alive).next, Next::Poll);
  const LinkWait::Step s = w.observe(30'001 * kMs, false, "", PeerState::Alive);
  EXPECT_EQ(s.next, Next::Fail);
  EXPECT_TRUE(s.abort);
  EXPECT_NE(w.why().find("waiting for rank 1 to join"), std::string::npos) << w.why();
  EXPECT_NE(w.why().find("within 30 s"), std::string::npos) << w.why();
  EXPECT_EQ(w.why().find("heartbeats"), std::string::npos) << w.why();
}

TEST(LinkWait, ARefusalFailsTheSenderAtOnceWithTheReceiversReason) {
  LinkWait w("NCCL rows to rank 2", 30'000 * kMs, 1'200 * kMs);
  const LinkWait::Step s = w.observe(3 * kMs, false, "", PeerState::Refused, "a batch's columns differ in length");
  EXPECT_EQ(s.next, Next::Fail);
  EXPECT_TRUE(s.abort);
  EXPECT_NE(w.why().find("a batch's columns differ in length"), std::string::npos) << w.why();
}

TEST(LinkWait, CompletionAfterAnAbortDoesNotCountAsDelivered) {
  LinkWait w("NCCL rows to rank 2", 30'000 * kMs, 1'200 * kMs);
  EXPECT_TRUE(w.observe(1 * kMs, false, "internal error", PeerState::Alive).abort);
  EXPECT_EQ(w.observe(2 * kMs, true, "", PeerState::Alive).next, Next::Poll);
}

}  // namespace
}  // namespace sy::dist
