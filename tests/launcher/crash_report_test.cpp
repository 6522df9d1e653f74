// The crash report of a `tenax` process: a fault of its own is named as a bug with a backtrace,
// a fatal signal sent from outside is named with its sender, and either way the process still
// dies of that signal (its exit status and core dump are unchanged).
#include "crash_report.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <string>

namespace {

struct Death {
  pid_t pid = -1;
  int signal = 0;  // the signal that ended the child, or 0
  std::string said;
};

// Runs `body` in a child whose stderr is captured, once install_crash_report has run there;
// `then` runs here once the child is that far (it may signal the child).
Death in_child(const std::function<void()>& body, const std::function<void(pid_t)>& then = {}) {
  int said_pipe[2];
  int ready_pipe[2];
  if (::pipe(said_pipe) != 0 || ::pipe(ready_pipe) != 0) return {};
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(said_pipe[1], STDERR_FILENO);
    tenax::launcher::install_crash_report("probe");
    const char byte = 1;
    if (::write(ready_pipe[1], &byte, 1) != 1) ::_exit(99);
    body();
    ::_exit(0);
  }
  ::close(said_pipe[1]);
  ::close(ready_pipe[1]);
  Death d;
  d.pid = child;
  char byte = 0;
  if (::read(ready_pipe[0], &byte, 1) == 1 && then) then(child);
  ::close(ready_pipe[0]);
  char buffer[4096];
  for (ssize_t n; (n = ::read(said_pipe[0], buffer, sizeof buffer)) > 0;) d.said.append(buffer, static_cast<size_t>(n));
  ::close(said_pipe[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) d.signal = WTERMSIG(status);
  return d;
}

TEST(CrashReport, AFaultOfItsOwnIsNamedAsABugWithABacktraceAndStillKillsTheProcess) {
  const Death d = in_child([] { std::abort(); });
  EXPECT_EQ(d.signal, SIGABRT) << d.said;
  EXPECT_NE(d.said.find("probe (pid " + std::to_string(d.pid) +
                        "): fatal signal SIGABRT; this is a bug in tenax, please report it"),
            std::string::npos)
      << d.said;
  // backtrace_symbols_fd writes one line per frame, "binary(+0xoffset)[0xaddress]" at least.
  EXPECT_NE(d.said.find("(+0x"), std::string::npos) << d.said;
}

TEST(CrashReport, AFatalSignalFromOutsideNamesItsSender) {
  const Death d = in_child(
      [] {
        for (;;) ::pause();
      },
      [](pid_t child) { ::kill(child, SIGSEGV); });
  EXPECT_EQ(d.signal, SIGSEGV) << d.said;
  EXPECT_NE(d.said.find("probe (pid " + std::to_string(d.pid) + "): fatal signal SIGSEGV sent by pid " +
                        std::to_string(::getpid()) + " (a kill from outside"),
            std::string::npos)
      << d.said;
  EXPECT_EQ(d.said.find("this is a bug"), std::string::npos) << d.said;
}

}  // namespace
