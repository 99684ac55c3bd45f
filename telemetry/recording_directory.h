// Where recordings started over the control socket may be written: one directory chosen at
// start-up. Control names a file relative to it; anything that would land elsewhere, or
// replace a file that is not one of our recordings, is refused with the reason.
#pragma once

#include <filesystem>
#include <string_view>

#include "base/status.h"

namespace sy::telemetry {

class RecordingDirectory {
 public:
  // Creates `dir` (and its parents) when missing; refuses a path that exists and is not a
  // directory.
  static StatusOr<RecordingDirectory> open(const std::filesystem::path& dir);
  // $XDG_STATE_HOME/switchyard/recordings, else ~/.local/state/switchyard/recordings, else
  // ./recordings when there is no home.
  static std::filesystem::path default_path();

  // The canonical directory.
  const std::filesystem::path& path() const { return dir_; }

  // The file `name` stands for inside the directory. Refused: an empty name, NUL or other
  // control characters, an absolute path, a ".." component, a name not ending in ".db", a
  // missing sub-directory, a symbolic link anywhere on the way (even one pointing inside),
  // and an existing file unless `overwrite` is set and the file is a Switchyard recording
  // (SQLite with our application id) rather than anything else.
  StatusOr<std::filesystem::path> resolve(std::string_view name, bool overwrite) const;

 private:
  explicit RecordingDirectory(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path dir_;
};

// Whether `file` starts with an SQLite header carrying the Switchyard trace application id.
bool is_switchyard_recording(const std::filesystem::path& file);

}  // namespace sy::telemetry
