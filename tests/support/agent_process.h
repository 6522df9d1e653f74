// Test helpers for driving real `tenax run` agents as child processes: start one with its
// output in a file, wait for it with a deadline, find and kill its workers (a node's death),
// compare the model tensors of two checkpoints. Used by the multi-node and Slurm tests.
// Thread-safety: one test thread.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tenax/core/unique_fd.h"

extern char** environ;

namespace tenax::testing {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A free TCP port on 127.0.0.1 (bound and released; good enough for a test).
inline int free_port() {
  const UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

/// One child process with stdout and stderr in `log`; extra "KEY=VALUE" entries in its env.
class ChildProcess {
 public:
  ChildProcess(const std::vector<std::string>& argv, const std::filesystem::path& log,
               const std::vector<std::string>& extra_env = {})
      : log_(log) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
    env.insert(env.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> cargv, cenv;
    for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
    cargv.push_back(nullptr);
    for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    if (::posix_spawnp(&pid_, cargv[0], &actions, nullptr, cargv.data(), cenv.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
  }
  ~ChildProcess() {
    if (pid_ > 0 && !exit_code_) {
      for (pid_t child : children()) ::kill(child, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  /// The exit code (128 + signal for a signal), or nullopt if still running at the deadline.
  std::optional<int> wait(std::chrono::seconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!exit_code_ && pid_ > 0) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return exit_code_;
  }

  /// The processes whose parent is this one (its workers), from /proc.
  std::vector<pid_t> children() const {
    std::vector<pid_t> out;
    DIR* dir = ::opendir("/proc");
    if (!dir) return out;
    while (dirent* entry = ::readdir(dir)) {
      const std::string name = entry->d_name;
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string stat = read_text("/proc/" + name + "/stat");
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      char state = 0;
      pid_t ppid = 0;
      rest >> state >> ppid;
      if (ppid == pid_) out.push_back(static_cast<pid_t>(std::stol(name)));
    }
    ::closedir(dir);
    return out;
  }

  /// A node's death: SIGKILL to the agent and to every one of its workers.
  void kill_node() {
    const std::vector<pid_t> workers = children();
    ::kill(pid_, SIGKILL);
    for (pid_t w : workers) ::kill(w, SIGKILL);
  }

  /// Sends `signal` to this process only (not its workers).
  void signal(int signal) const { ::kill(pid_, signal); }

  std::string log() const { return read_text(log_); }

 private:
  pid_t pid_ = -1;
  std::filesystem::path log_;
  std::optional<int> exit_code_;
};

/// The environment of a live process (for the rank of a worker, or whether it is a spare), as it
/// started: NUL-separated, with a NUL in front so that every entry reads "\0NAME=value\0".
inline std::string environ_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  return std::string(1, '\0') + std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Whether the process started as a warm spare (`tenax run --spares K`).
inline bool is_spare(pid_t pid) { return environ_of(pid).find("TENAX_SPARE_ID=") != std::string::npos; }

/// The agent's child that started as `rank` (not a spare), or -1.
inline pid_t worker_pid(const ChildProcess& agent, int rank) {
  for (pid_t child : agent.children()) {
    const std::string env = environ_of(child);
    if (env.find("TENAX_SPARE_ID=") != std::string::npos) continue;
    if (env.find(std::string("\0RANK=", 6) + std::to_string(rank) + '\0') != std::string::npos) return child;
  }
  return -1;
}

/// Waits until `path` exists (false at the deadline).
inline bool wait_for_path(const std::filesystem::path& path, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::filesystem::exists(path);
}

}  // namespace tenax::testing
