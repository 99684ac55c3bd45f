#include "console/model/trace_copy.h"

#include <sqlite3.h>

#include <string>
#include <system_error>

namespace sy::console {
namespace {

struct Db {
  sqlite3* db = nullptr;
  ~Db() {
    if (db != nullptr) sqlite3_close(db);
  }
};

}  // namespace

Status copy_trace_database(const std::filesystem::path& source, const std::filesystem::path& destination) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source, ec))
    return Status::Error("trace " + source.string() + " does not exist or is not a file");
  if (std::filesystem::equivalent(source, destination, ec))
    return Status::Error("the copy " + destination.string() + " would overwrite the trace itself");
  Db src, dst;
  if (sqlite3_open_v2(source.c_str(), &src.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    return Status::Error("cannot open " + source.string() + ": " + sqlite3_errmsg(src.db));
  // Touch the schema so that "not a database" shows here, naming the source.
  if (sqlite3_exec(src.db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr) != SQLITE_OK)
    return Status::Error(source.string() + " is not an SQLite database: " + sqlite3_errmsg(src.db));

  std::filesystem::path temp = destination;
  temp += ".partial";
  std::filesystem::remove(temp, ec);
  if (sqlite3_open_v2(temp.c_str(), &dst.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
    return Status::Error("cannot create " + destination.string() + ": " + sqlite3_errmsg(dst.db));
  sqlite3_backup* backup = sqlite3_backup_init(dst.db, "main", src.db, "main");
  if (backup == nullptr) {
    const std::string message = sqlite3_errmsg(dst.db);
    std::filesystem::remove(temp, ec);
    return Status::Error("cannot copy " + source.string() + ": " + message);
  }
  int rc;
  // Pages in steps, so a writer that still appends to the source is not locked out for long.
  while ((rc = sqlite3_backup_step(backup, 1024)) == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
    sqlite3_sleep(rc == SQLITE_OK ? 0 : 5);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    const std::string message = sqlite3_errstr(rc);
    sqlite3_close(dst.db);
    dst.db = nullptr;
    std::filesystem::remove(temp, ec);
    return Status::Error("copying " + source.string() + " to " + destination.string() + " failed: " + message);
  }
  sqlite3_close(dst.db);
  dst.db = nullptr;
  std::filesystem::rename(temp, destination, ec);
  if (ec) {
    std::filesystem::remove(temp, ec);
    return Status::Error("cannot write " + destination.string() + ": " + ec.message());
  }
  return Status::Ok();
}

}  // namespace sy::console
