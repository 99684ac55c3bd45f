// Progress: nothing for short work, a line at most every interval off a terminal, a redrawn bar
// with count, rate and ETA on one, the final line at finish (a fake clock: cannot flake).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "engine/util/progress.h"

namespace sy::test {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;

struct Captured {
  std::FILE* file = std::tmpfile();
  ~Captured() { std::fclose(file); }
  std::string text() const {
    std::fflush(file);
    std::string out;
    std::rewind(file);
    for (int c; (c = std::fgetc(file)) != EOF;) out += static_cast<char>(c);
    return out;
  }
};

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(Progress, ShortWorkShowsNothing) {
  Captured cap;
  std::int64_t t = 0;
  {
    Progress p("loading", 100, "tensors", {cap.file, false, [&] { return t; }});
    for (int i = 0; i < 100; ++i) {
      t += kSecond / 100;  // one second in all
      p.add();
    }
  }
  EXPECT_EQ(cap.text(), "");
}

TEST(Progress, OffATerminalOneLineEveryIntervalAtMost) {
  Captured cap;
  std::int64_t t = 0;
  {
    Progress p("reproduce", 60, "rows", {cap.file, false, [&] { return t; }});
    for (int i = 0; i < 60; ++i) {
      t += kSecond / 2;  // 30 s in all, updates twice a second
      p.add();
    }
    const std::string during = cap.text();
    EXPECT_EQ(count(during, "\n"), 6u) << during;  // at 5, 10, … 30 s
    EXPECT_EQ(during.find('\r'), std::string::npos);
    EXPECT_NE(during.find("reproduce  17% 10/60 rows 2 rows/s ETA 25.0s\n"), std::string::npos) << during;
  }
  const std::string all = cap.text();
  EXPECT_EQ(count(all, "\n"), 7u);
  EXPECT_NE(all.find("reproduce 100% 60/60 rows in 30.0s\n"), std::string::npos) << all;
}

TEST(Progress, OnATerminalABarRedrawnInPlace) {
  Captured cap;
  std::int64_t t = 0;
  {
    Progress p("make-model", 4 << 20, "B", {cap.file, true, [&] { return t; }});
    t = kSecond;
    p.update(1 << 20);
    t = 2 * kSecond;
    p.update(2 << 20);
  }
  const std::string all = cap.text();
  EXPECT_NE(all.find("\rmake-model [######..................]  25% 1.0 MiB/4.0 MiB 1.0 MiB/s ETA 3.0s\x1b[K"),
            std::string::npos)
      << all;
  EXPECT_EQ(count(all, "\r"), 3u);  // two updates and the final state
  EXPECT_EQ(count(all, "\n"), 1u);
  EXPECT_NE(all.find("  50% 2.0 MiB/4.0 MiB in 2.0s\x1b[K\n"), std::string::npos) << all;
}

TEST(Progress, NotesGoAboveTheBar) {
  Captured cap;
  std::int64_t t = 0;
  Progress p("rows", 2, "rows", {cap.file, true, [&] { return t; }});
  p.note("before any bar");
  t = kSecond;
  p.update(1);
  p.note("row 1");
  EXPECT_EQ(cap.text(), "before any bar\n\rrows [############............]  50% 1/2 rows 1 rows/s ETA 1.0s\x1b[K"
                        "\r\x1b[Krow 1\n\rrows [############............]  50% 1/2 rows 1 rows/s ETA 1.0s\x1b[K");
}

TEST(Progress, UnknownTotalHasNoBarNorEta) {
  Captured cap;
  std::int64_t t = 0;
  Progress p("calibrate", 0, "runs", {cap.file, true, [&] { return t; }});
  t = 2 * kSecond;
  p.update(4);
  EXPECT_EQ(p.describe(), "calibrate 4 runs 2 runs/s");
}

}  // namespace
}  // namespace sy::test
