// One worker: a child process started with posix_spawnp() in its own process group, so that a
// signal sent to the group also reaches any children the worker started.
//
// posix_spawnp() rather than fork(): the agent runs a ZeroMQ thread, and a forked copy of a
// multi-threaded process may only call async-signal-safe functions before exec.
//
// The process is observed with waitid(WNOWAIT): an ended worker stays a zombie until reap(), so
// its pid — which is also its process group id — cannot be reused by an unrelated process while
// the agent may still signal the group.
//
// Ownership: move-only. The destructor of a worker still running SIGKILLs its group and reaps it,
// waiting at most kReapTimeout; it never throws and never waits for a graceful exit (that is the
// agent's explicit TERM/grace/KILL sequence).
// Thread-safety: one owning thread.
//
//   auto worker = WorkerProcess::spawn({"./app", "--config", "run.toml"}, env);
//   while (!worker.poll()) std::this_thread::sleep_for(20ms);
//   log->info("worker {}", worker.status()->describe());
//   worker.reap();
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "exit_status.h"

namespace tenax::launcher {

class WorkerProcess {
 public:
  /// Longest the destructor waits for a SIGKILLed worker to be reapable.
  static constexpr std::chrono::milliseconds kReapTimeout{1000};

  /// Starts argv[0] (searched in PATH unless it contains '/') with argv and exactly `env`
  /// ("KEY=VALUE" strings) in a new process group. Throws tenax::Error naming the program.
  static WorkerProcess spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env);

  WorkerProcess(WorkerProcess&& other) noexcept;
  WorkerProcess& operator=(WorkerProcess&& other) noexcept;
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  ~WorkerProcess();

  /// The process id (also its process group id).
  pid_t pid() const { return pid_; }

  /// Non-blocking: the exit status once the process has ended, nullopt while it runs.
  /// Does not reap, see the header comment.
  std::optional<ExitStatus> poll();

  /// The status found by the last poll(), if the process has ended.
  const std::optional<ExitStatus>& status() const { return status_; }

  /// Sends `signal` to the whole process group. No-op once reaped; a group that no longer
  /// exists is not an error.
  void signal_group(int signal);

  /// Waits (at most `timeout`) for the ended process and reaps it. Returns false when it had not
  /// ended by then. After reap() the pid may belong to someone else: nothing is signalled again.
  bool reap(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  /// True while the process is stopped (SIGSTOP, SIGTSTP, a debugger): /proc state T or t.
  bool stopped() const;
  /// Whether the process is being killed: a SIGKILL pending, or its exit under way (a process
  /// with a large address space takes milliseconds to end after SIGKILL).
  bool dying() const;
  /// True once the zombie has been collected.
  bool reaped() const { return reaped_; }

 private:
  explicit WorkerProcess(pid_t pid) : pid_(pid) {}
  void release() noexcept;

  pid_t pid_ = -1;
  bool reaped_ = false;
  std::optional<ExitStatus> status_;
};

}  // namespace tenax::launcher
