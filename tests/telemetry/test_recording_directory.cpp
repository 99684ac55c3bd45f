// The recording directory is the only place control may write: names that would land
// elsewhere, replace a file that is not a recording, or follow a link are refused.
#include "telemetry/recording_directory.h"

#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include "telemetry/trace_recorder.h"

namespace sy::telemetry {
namespace {

namespace fs = std::filesystem;

class RecordingDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("sy_test_recdir_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    auto dir = RecordingDirectory::open(root_ / "recordings");
    ASSERT_TRUE(dir.ok()) << dir.status().message();
    dir_.emplace(*dir);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string refusal(const std::string& name, bool overwrite = false) const {
    auto p = dir_->resolve(name, overwrite);
    EXPECT_FALSE(p.ok()) << name << " resolved to " << (p.ok() ? p->string() : "");
    return p.ok() ? "" : p.status().message();
  }

  fs::path root_;
  std::optional<RecordingDirectory> dir_;
};

TEST_F(RecordingDirectoryTest, CreatesTheDirectoryAndResolvesNamesInsideIt) {
  EXPECT_TRUE(fs::is_directory(root_ / "recordings"));
  auto p = dir_->resolve("run.db", false);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(*p, fs::canonical(root_ / "recordings") / "run.db");
  fs::create_directory(root_ / "recordings" / "day1");
  auto nested = dir_->resolve("day1/run.db", false);
  ASSERT_TRUE(nested.ok()) << nested.status().message();
  EXPECT_EQ(nested->parent_path().filename(), "day1");
}

TEST_F(RecordingDirectoryTest, RefusesEverythingThatLeavesTheDirectory) {
  EXPECT_NE(refusal("/etc/passwd.db").find("absolute path"), std::string::npos);
  EXPECT_NE(refusal("../escape.db").find("'..'"), std::string::npos);
  EXPECT_NE(refusal("a/../../escape.db").find("'..'"), std::string::npos);
  EXPECT_NE(refusal("").find("empty name"), std::string::npos);
  EXPECT_NE(refusal(std::string("run\0.db", 7)).find("control character"), std::string::npos);
  EXPECT_NE(refusal("run\n.db").find("control character"), std::string::npos);
  EXPECT_NE(refusal("run.txt").find("must end in .db"), std::string::npos);
  EXPECT_NE(refusal("missing/run.db").find("does not exist"), std::string::npos);
  // A link out of the directory, as a sub-directory or as the file itself.
  fs::create_directory(root_ / "outside");
  fs::create_directory_symlink(root_ / "outside", root_ / "recordings" / "out");
  EXPECT_NE(refusal("out/run.db").find("symbolic link"), std::string::npos);
  fs::create_symlink(root_ / "outside" / "victim.db", root_ / "recordings" / "link.db");
  EXPECT_NE(refusal("link.db", true).find("symbolic link"), std::string::npos);
  EXPECT_FALSE(fs::exists(root_ / "outside" / "victim.db"));
}

TEST_F(RecordingDirectoryTest, OverwritesOnlyRecordingsAndOnlyWhenAsked) {
  const fs::path other = root_ / "recordings" / "notes.db";
  std::ofstream(other) << "not a recording";
  EXPECT_NE(refusal("notes.db").find("exists"), std::string::npos);
  EXPECT_NE(refusal("notes.db", true).find("not a Switchyard recording"), std::string::npos);

  RecorderOptions o;
  o.path = root_ / "recordings" / "old.db";
  auto recorder = TraceRecorder::open(o);
  ASSERT_TRUE(recorder.ok()) << recorder.status().message();
  ASSERT_TRUE((*recorder)->stop().ok());
  EXPECT_TRUE(is_switchyard_recording(o.path));
  EXPECT_NE(refusal("old.db").find("exists"), std::string::npos);
  EXPECT_TRUE(dir_->resolve("old.db", true).ok());
}

TEST_F(RecordingDirectoryTest, RefusesAFileWhereTheDirectoryShouldBe) {
  std::ofstream(root_ / "file") << "x";
  auto dir = RecordingDirectory::open(root_ / "file");
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is not a directory"), std::string::npos);
}

}  // namespace
}  // namespace sy::telemetry
