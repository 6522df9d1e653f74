#include "worker_process.h"

#include <fstream>
#include <sstream>
#include <iterator>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <thread>
#include <utility>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

// RAII for posix_spawnattr_t.
class SpawnAttributes {
 public:
  SpawnAttributes() { check(posix_spawnattr_init(&attr_), "posix_spawnattr_init"); }
  ~SpawnAttributes() { posix_spawnattr_destroy(&attr_); }
  SpawnAttributes(const SpawnAttributes&) = delete;
  SpawnAttributes& operator=(const SpawnAttributes&) = delete;
  posix_spawnattr_t* get() { return &attr_; }

  static void check(int rc, const char* what) {
    if (rc != 0) throw Error(std::string(what) + " failed: " + std::strerror(rc));
  }

 private:
  posix_spawnattr_t attr_;
};

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

WorkerProcess WorkerProcess::spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty()) throw Error("WorkerProcess::spawn: empty argv");
  SpawnAttributes attr;
  // Own process group (pgid = pid); an empty signal mask; default dispositions for the signals
  // the agent handles or forwards, whatever the agent inherited.
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&defaults, s);
  SpawnAttributes::check(
      posix_spawnattr_setflags(attr.get(), POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF),
      "posix_spawnattr_setflags");
  SpawnAttributes::check(posix_spawnattr_setpgroup(attr.get(), 0), "posix_spawnattr_setpgroup");
  SpawnAttributes::check(posix_spawnattr_setsigmask(attr.get(), &empty_mask), "posix_spawnattr_setsigmask");
  SpawnAttributes::check(posix_spawnattr_setsigdefault(attr.get(), &defaults), "posix_spawnattr_setsigdefault");

  std::vector<char*> c_argv = c_strings(argv);
  std::vector<char*> c_env = c_strings(env);
  pid_t pid = -1;
  int rc = posix_spawnp(&pid, argv[0].c_str(), nullptr, attr.get(), c_argv.data(), c_env.data());
  if (rc != 0) {
    throw Error("cannot start '" + argv[0] + "': " + std::strerror(rc));
  }
  return WorkerProcess(pid);
}

WorkerProcess::WorkerProcess(WorkerProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      reaped_(std::exchange(other.reaped_, false)),
      status_(std::exchange(other.status_, std::nullopt)) {}

WorkerProcess& WorkerProcess::operator=(WorkerProcess&& other) noexcept {
  if (this != &other) {
    release();
    pid_ = std::exchange(other.pid_, -1);
    reaped_ = std::exchange(other.reaped_, false);
    status_ = std::exchange(other.status_, std::nullopt);
  }
  return *this;
}

WorkerProcess::~WorkerProcess() { release(); }

void WorkerProcess::release() noexcept {
  if (pid_ <= 0 || reaped_) return;
  if (!status_) ::kill(-pid_, SIGKILL);
  try {
    reap(kReapTimeout);
  } catch (const std::exception&) {
    // A destructor never throws; an unreaped zombie is collected when the agent exits.
  }
  pid_ = -1;
}

std::optional<ExitStatus> WorkerProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  int rc;
  do {
    rc = ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    // ECHILD: someone else reaped our child, which the agent never does. Report it as a failure
    // rather than waiting forever for a process we can no longer see.
    status_ = ExitStatus::exited(255);
    reaped_ = true;
    return status_;
  }
  if (info.si_pid == 0) return std::nullopt;  // still running
  switch (info.si_code) {
    case CLD_EXITED: status_ = ExitStatus::exited(info.si_status); break;
    case CLD_DUMPED: status_ = ExitStatus::signaled(info.si_status, true); break;
    default: status_ = ExitStatus::signaled(info.si_status); break;  // CLD_KILLED
  }
  return status_;
}

void WorkerProcess::signal_group(int signal) {
  if (pid_ <= 0 || reaped_) return;
  ::kill(-pid_, signal);  // ESRCH (group already empty) is fine
}

bool WorkerProcess::reap(std::chrono::milliseconds timeout) {
  if (pid_ <= 0 || reaped_) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int wait_status = 0;
    pid_t rc = ::waitpid(pid_, &wait_status, WNOHANG);
    if (rc == pid_) {
      if (!status_) status_ = ExitStatus::from_wait_status(wait_status);
      reaped_ = true;
      return true;
    }
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) {  // ECHILD: nothing left to reap
      if (!status_) status_ = ExitStatus::exited(255);
      reaped_ = true;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

bool WorkerProcess::stopped() const {
  if (pid_ <= 0 || reaped_) return false;
  std::ifstream in("/proc/" + std::to_string(pid_) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= stat.size()) return false;
  const char state = stat[close + 2];
  return state == 'T' || state == 't';
}

bool WorkerProcess::dying() const {
  if (pid_ <= 0 || reaped_) return false;
  const std::string dir = "/proc/" + std::to_string(pid_);
  std::ifstream stat_file(dir + "/stat");
  const std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close != std::string::npos) {
    // After the command name: state, ppid, pgrp, session, tty_nr, tpgid, flags.
    std::istringstream fields(stat.substr(close + 1));
    std::string field;
    for (int i = 0; i < 7 && fields >> field; ++i) {
      constexpr unsigned long kExiting = 0x4;  // PF_EXITING (include/linux/sched.h)
      if (i == 6 && (std::stoul(field) & kExiting) != 0) return true;
    }
  }
  std::ifstream status_file(dir + "/status");
  for (std::string line; std::getline(status_file, line);) {
    if (line.rfind("SigPnd:", 0) != 0 && line.rfind("ShdPnd:", 0) != 0) continue;
    constexpr unsigned long long kKill = 1ULL << (SIGKILL - 1);
    if ((std::stoull(line.substr(7), nullptr, 16) & kKill) != 0) return true;
  }
  return false;
}

}  // namespace tenax::launcher
