// Runs `switchyard demo` (or another serving command) as a child process for the live tests:
// its output is read on a thread, the endpoints it prints are parsed, and it is interrupted
// (SIGINT, then SIGKILL) when the test is done.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace sy::testing {

class DemoProcess {
 public:
  // argv after the executable; extra environment entries ("KEY=VALUE").
  DemoProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> all = {SY_SWITCHYARD_BIN, "--threads", "1"};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> environment = env;
    for (char** e = environ; *e; ++e) environment.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);

    int fds[2];
    if (::pipe(fds) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    if (::posix_spawn(&pid_, all[0].c_str(), &actions, nullptr, argv.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    reader_ = std::thread([this, fd = fds[0]] {
      char buf[4096];
      for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        std::lock_guard lock(mutex_);
        output_.append(buf, static_cast<std::size_t>(n));
        changed_.notify_all();
      }
      ::close(fd);
      std::lock_guard lock(mutex_);
      closed_ = true;
      changed_.notify_all();
    });
  }
  ~DemoProcess() {
    stop(SIGINT);
    if (reader_.joinable()) reader_.join();
  }

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Sends `signal` and waits for the process (SIGKILL after 20 s). Returns the wait status.
  int stop(int signal) {
    if (pid_ <= 0 || exited_) return status_;
    ::kill(pid_, signal);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (::waitpid(pid_, &status_, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status_, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    exited_ = true;
    return status_;
  }

  // Waits until the output matches `pattern` (its first group is returned) or `limit` passes.
  std::string wait_for(const std::string& pattern, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    const std::regex re(pattern);
    std::unique_lock lock(mutex_);
    std::smatch m;
    changed_.wait_for(lock, limit, [&] { return std::regex_search(output_, m, re) || closed_; });
    if (!std::regex_search(output_, m, re)) return {};
    return m.size() > 1 ? m[1].str() : m[0].str();
  }
  std::string output() const {
    std::lock_guard lock(mutex_);
    return output_;
  }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool exited_ = false;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::string output_;
  bool closed_ = false;
};

}  // namespace sy::testing
