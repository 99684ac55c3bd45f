// Stop strings over streamed pieces: the answer ends before the earliest stop string, pieces
// that may begin one are held back, and the pieces sent always add up to the whole answer.
#include <gtest/gtest.h>

#include "engine/serving/http/stop_strings.h"

namespace sy::http {
namespace {

// Feeds the pieces; returns what was sent in all.
std::string feed(StopStrings& s, const std::vector<std::string>& pieces) {
  std::string out;
  for (const std::string& p : pieces) out += s.push(p);
  return out + s.finish();
}

TEST(StopStrings, EndsBeforeTheStopStringAcrossPieces) {
  StopStrings s({"\n\n", "END"});
  EXPECT_EQ(s.push("Hello E"), "Hello ");  // "E" may begin END
  EXPECT_EQ(s.push("N"), "");
  EXPECT_EQ(s.push("Dless"), "");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.matched(), "END");
  EXPECT_EQ(s.push("more"), "");
  EXPECT_EQ(s.finish(), "");
}

TEST(StopStrings, ReleasesHeldTextThatTurnsOutNotToStop) {
  StopStrings s({"END"});
  EXPECT_EQ(s.push("a EN"), "a ");
  EXPECT_EQ(s.push("ough"), "ENough");
  EXPECT_FALSE(s.stopped());
  StopStrings t({"END"});
  EXPECT_EQ(feed(t, {"x", "E", "N"}), "xEN");  // held back until the end, then sent
}

TEST(StopStrings, TheEarliestMatchWinsAndNoneSendsEverything) {
  StopStrings s({"cd", "b"});
  EXPECT_EQ(feed(s, {"abcd"}), "a");
  EXPECT_EQ(s.matched(), "b");
  StopStrings none({});
  EXPECT_EQ(feed(none, {"é", "😀", "x"}), "é😀x");
  StopStrings multibyte({"😀!"});
  EXPECT_EQ(multibyte.push("ok 😀"), "ok ");
  EXPECT_EQ(multibyte.push("!"), "");
  EXPECT_TRUE(multibyte.stopped());
}

}  // namespace
}  // namespace sy::http
