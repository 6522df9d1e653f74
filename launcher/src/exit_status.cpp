#include "exit_status.h"

#include <sys/wait.h>

#include <csignal>

namespace tenax::launcher {

ExitStatus ExitStatus::from_wait_status(int wait_status) {
  if (WIFSIGNALED(wait_status)) return signaled(WTERMSIG(wait_status), WCOREDUMP(wait_status));
  if (WIFEXITED(wait_status)) return exited(WEXITSTATUS(wait_status));
  return exited(255);
}

std::string ExitStatus::describe() const {
  if (kind_ == Kind::kExited) return "exited with status " + std::to_string(value_);
  std::string text = "killed by signal " + std::to_string(value_) + " (" + signal_name(value_);
  if (core_dumped_) text += ", core dumped";
  return text + ")";
}

std::string signal_name(int signal) {
  // A table rather than sigabbrev_np(): portable, and the names operators know.
  switch (signal) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGCHLD: return "SIGCHLD";
    case SIGCONT: return "SIGCONT";
    case SIGSTOP: return "SIGSTOP";
    case SIGTSTP: return "SIGTSTP";
    case SIGTTIN: return "SIGTTIN";
    case SIGTTOU: return "SIGTTOU";
    case SIGURG: return "SIGURG";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    case SIGVTALRM: return "SIGVTALRM";
    case SIGPROF: return "SIGPROF";
    case SIGWINCH: return "SIGWINCH";
    case SIGSYS: return "SIGSYS";
    default: break;
  }
  return "signal " + std::to_string(signal);
}

}  // namespace tenax::launcher
