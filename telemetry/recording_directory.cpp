#include "telemetry/recording_directory.h"

#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "telemetry/trace_schema.h"

namespace sy::telemetry {

namespace fs = std::filesystem;

fs::path RecordingDirectory::default_path() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) return fs::path(state) / "switchyard" / "recordings";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".local" / "state" / "switchyard" / "recordings";
  return fs::path("recordings");
}

StatusOr<RecordingDirectory> RecordingDirectory::open(const fs::path& dir) {
  if (dir.empty()) return Status::Error("recording directory: empty path");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) return Status::Error("recording directory " + dir.string() + " is not a directory");
  } else {
    fs::create_directories(dir, ec);
    if (ec) return Status::Error("recording directory " + dir.string() + " cannot be created: " + ec.message());
  }
  const fs::path canonical = fs::canonical(dir, ec);
  if (ec) return Status::Error("recording directory " + dir.string() + ": " + ec.message());
  return RecordingDirectory(canonical);
}

bool is_switchyard_recording(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::array<unsigned char, 72> header{};
  if (!in.read(reinterpret_cast<char*>(header.data()), header.size())) return false;
  if (std::memcmp(header.data(), "SQLite format 3", 16) != 0) return false;
  // The application id sits big-endian at offset 68 of the database header.
  const std::uint32_t id = (std::uint32_t{header[68]} << 24) | (std::uint32_t{header[69]} << 16) |
                           (std::uint32_t{header[70]} << 8) | std::uint32_t{header[71]};
  return id == static_cast<std::uint32_t>(trace_schema::kApplicationId);
}

StatusOr<fs::path> RecordingDirectory::resolve(std::string_view name, bool overwrite) const {
  const std::string shown(name.substr(0, 200));
  auto refuse = [&](const std::string& why) {
    return Status::Error("recording '" + shown + "' refused: " + why + " (recordings go under " + dir_.string() + ")");
  };
  if (name.empty()) return refuse("empty name");
  for (const char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return refuse("control character in the name");
  const fs::path relative(std::string{name});
  if (relative.is_absolute() || relative.has_root_name() || relative.has_root_directory())
    return refuse("absolute path; name a file relative to the recording directory");
  for (const fs::path& part : relative)
    if (part == "..") return refuse("'..' leaves the recording directory");
  if (relative.extension() != ".db") return refuse("the name must end in .db");
  // Walk down component by component: no symbolic link anywhere, so nothing resolves outside.
  fs::path at = dir_;
  std::error_code ec;
  for (const fs::path& part : relative) {
    if (part.empty() || part == ".") continue;
    at /= part;
    const fs::file_status st = fs::symlink_status(at, ec);
    if (fs::is_symlink(st)) return refuse(at.string() + " is a symbolic link");
    if (at != dir_ / relative && !fs::is_directory(st)) return refuse("directory " + at.string() + " does not exist");
  }
  const fs::file_status st = fs::symlink_status(at, ec);
  if (fs::exists(st)) {
    if (!fs::is_regular_file(st)) return refuse(at.string() + " exists and is not a regular file");
    if (!overwrite) return refuse(at.string() + " exists; choose a new name (or overwrite a recording)");
    if (!is_switchyard_recording(at)) return refuse(at.string() + " exists and is not a Switchyard recording");
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    fs::path sibling = at;
    sibling += suffix;
    const fs::file_status sst = fs::symlink_status(sibling, ec);
    if (fs::exists(sst) && !fs::is_regular_file(sst)) return refuse(sibling.string() + " exists and is not a regular file");
  }
  return at;
}

}  // namespace sy::telemetry
