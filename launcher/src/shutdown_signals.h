// Turns SIGINT/SIGTERM/SIGUSR1 (Slurm's warning signal) sent to the agent into an event its monitor loop can wait for.
//
// The handlers only record the signal number and write one byte to a self-pipe (DESIGN.md
// decision 7); wait() polls that pipe, so the loop wakes at once on a signal and otherwise acts
// as its sleep.
//
// At most one instance exists at a time (signal dispositions are process-wide); the constructor
// throws tenax::Error if another is alive. The destructor restores the previous handlers.
// Thread-safety: one owning thread.
//
//   ShutdownSignals signals;
//   while (...) {
//     if (int sig = signals.wait(20ms)) { forward(sig); break; }
//     poll_workers();
//   }
#pragma once

#include <chrono>
#include <csignal>

#include "tenax/core/unique_fd.h"

namespace tenax::launcher {

class ShutdownSignals {
 public:
  ShutdownSignals();
  ~ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  /// Sleeps up to `timeout`, waking early when a signal arrives. Returns the first signal
  /// received since construction (SIGINT, SIGTERM or SIGUSR1; reported again later), or 0.
  int wait(std::chrono::milliseconds timeout);

  /// The number of signals received so far (a second Ctrl-C skips the grace period).
  int count() const;

  /// The first signal received, or 0; does not wait.
  int received() const;

 private:
  UniqueFd read_fd_;
  UniqueFd write_fd_;  // closed after the handler stopped using it (g_write_fd reset first)
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_usr1_ {};
};

/// The conventional exit code of a process stopped by `signal`: 128 + signal (130, 143).
inline int exit_code_for_signal(int signal) { return 128 + signal; }

}  // namespace tenax::launcher
