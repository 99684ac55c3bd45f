#include "engine/util/assets.h"

#include <cstdlib>
#include <system_error>

namespace sy {
namespace {

namespace fs = std::filesystem;

fs::path share_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return fs::path("/usr/share/switchyard");
  return (self.parent_path().parent_path() / "share" / "switchyard").lexically_normal();
}

fs::path lookup(const char* env_name, const char* folder) {
  if (const char* env = std::getenv(env_name); env && *env) return env;
  return share_dir() / folder;
}

}  // namespace

fs::path assets_dir() { return lookup("SWITCHYARD_ASSETS", "assets"); }
fs::path layouts_dir() { return lookup("SWITCHYARD_LAYOUTS", "layouts"); }

}  // namespace sy
