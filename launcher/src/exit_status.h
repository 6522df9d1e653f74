// How a worker process ended, decoded from waitpid()/waitid() into words an operator can act on:
// "exited with status 7", "killed by signal 9 (SIGKILL)".
// Thread-safety: plain value type.
//
//   auto status = tenax::launcher::ExitStatus::from_wait_status(raw);
//   log->error("worker rank {} {}", rank, status.describe());
#pragma once

#include <string>

#include "tenax/core/exit_codes.h"

namespace tenax::launcher {

class ExitStatus {
 public:
  enum class Kind { kExited, kSignaled };

  /// A normal exit with `code` (0..255).
  static ExitStatus exited(int code) { return ExitStatus(Kind::kExited, code, false); }
  /// Terminated by signal `signal`; `core_dumped` when the kernel wrote a core file.
  static ExitStatus signaled(int signal, bool core_dumped = false) {
    return ExitStatus(Kind::kSignaled, signal, core_dumped);
  }
  /// Decodes a waitpid() status word (WIFEXITED / WIFSIGNALED). Stopped/continued statuses are
  /// not terminations; passing one is a programming error and reads as "exited with status 255".
  static ExitStatus from_wait_status(int wait_status);

  Kind kind() const { return kind_; }
  /// The exit code; meaningful for kExited only.
  int code() const { return kind_ == Kind::kExited ? value_ : -1; }
  /// The terminating signal; meaningful for kSignaled only.
  int signal() const { return kind_ == Kind::kSignaled ? value_ : 0; }
  bool core_dumped() const { return core_dumped_; }

  /// Exited with status 0.
  bool succeeded() const { return kind_ == Kind::kExited && value_ == 0; }
  /// Exited with kExitPreempted.
  bool preempted() const { return kind_ == Kind::kExited && value_ == kExitPreempted; }
  /// Exited with kExitUsage (a subset of failed()).
  bool config_error() const { return kind_ == Kind::kExited && value_ == kExitUsage; }
  /// Neither success nor preemption: killed by any signal or any other non-zero exit.
  bool failed() const { return !succeeded() && !preempted(); }

  /// "exited with status 7" / "killed by signal 9 (SIGKILL)" / "... (SIGSEGV, core dumped)".
  std::string describe() const;

  bool operator==(const ExitStatus& other) const {
    return kind_ == other.kind_ && value_ == other.value_ && core_dumped_ == other.core_dumped_;
  }
  bool operator!=(const ExitStatus& other) const { return !(*this == other); }

 private:
  ExitStatus(Kind kind, int value, bool core_dumped) : kind_(kind), value_(value), core_dumped_(core_dumped) {}

  Kind kind_;
  int value_;
  bool core_dumped_;
};

/// "SIGKILL" for 9, "SIGTERM" for 15, ...; "signal 42" for numbers without a standard name.
std::string signal_name(int signal);

}  // namespace tenax::launcher
