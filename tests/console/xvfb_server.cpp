#include "xvfb_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace sy::console::testing {

StatusOr<std::unique_ptr<XvfbServer>> XvfbServer::start(const std::string& screen) {
  int fds[2];
  if (pipe(fds) != 0) return Status::Error("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return Status::Error("fork failed");
  if (pid == 0) {
    close(fds[0]);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) {
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
    }
    const std::string fd = std::to_string(fds[1]);
    execlp("Xvfb", "Xvfb", "-displayfd", fd.c_str(), "-screen", "0", screen.c_str(), "-nolisten", "tcp", "-noreset",
           static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string number;
  pollfd p{fds[0], POLLIN, 0};
  while (number.empty() || number.back() != '\n') {
    if (poll(&p, 1, 20000) <= 0) break;
    char c;
    if (read(fds[0], &c, 1) != 1) break;
    number += c;
  }
  close(fds[0]);
  if (number.empty() || number.back() != '\n') {
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    return Status::Error(
        "Xvfb did not start (is the xvfb package installed? scripts/build.sh installs it)");
  }
  number.pop_back();
  const std::string display = ":" + number;
  setenv("DISPLAY", display.c_str(), 1);
  return std::unique_ptr<XvfbServer>(new XvfbServer(pid, display));
}

XvfbServer::~XvfbServer() {
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
}

}  // namespace sy::console::testing
