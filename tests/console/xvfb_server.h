// A private X server for GUI tests: Xvfb on a display it picks itself (-displayfd), so tests
// running in parallel never collide; DISPLAY points at it while it lives.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "base/status.h"

namespace sy::console::testing {

class XvfbServer {
 public:
  static StatusOr<std::unique_ptr<XvfbServer>> start(const std::string& screen = "1280x800x24");
  ~XvfbServer();
  const std::string& display() const { return display_; }

 private:
  XvfbServer(pid_t pid, std::string display) : pid_(pid), display_(std::move(display)) {}
  pid_t pid_;
  std::string display_;
};

}  // namespace sy::console::testing
