#include "exit_status.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>

namespace tenax::launcher {
namespace {

// Real wait statuses from real children, so the decoding is checked against the kernel's.
int wait_status_of(void (*child)()) {
  pid_t pid = ::fork();  // the test process is single-threaded here
  if (pid == 0) {
    child();
    _exit(99);
  }
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, 0), pid);
  return status;
}

TEST(LauncherExitStatus, DescribesExitCodes) {
  EXPECT_EQ(ExitStatus::exited(7).describe(), "exited with status 7");
  EXPECT_EQ(ExitStatus::exited(0).describe(), "exited with status 0");
  ExitStatus s = ExitStatus::from_wait_status(wait_status_of([] { _exit(7); }));
  EXPECT_EQ(s, ExitStatus::exited(7));
  EXPECT_EQ(s.code(), 7);
  EXPECT_TRUE(s.failed());
}

TEST(LauncherExitStatus, DescribesSignals) {
  EXPECT_EQ(ExitStatus::signaled(SIGKILL).describe(), "killed by signal 9 (SIGKILL)");
  EXPECT_EQ(ExitStatus::signaled(SIGTERM).describe(), "killed by signal 15 (SIGTERM)");
  EXPECT_EQ(ExitStatus::signaled(SIGSEGV, true).describe(), "killed by signal 11 (SIGSEGV, core dumped)");
  ExitStatus s = ExitStatus::from_wait_status(wait_status_of([] { ::raise(SIGKILL); }));
  EXPECT_EQ(s.kind(), ExitStatus::Kind::kSignaled);
  EXPECT_EQ(s.signal(), SIGKILL);
  EXPECT_EQ(s.describe(), "killed by signal 9 (SIGKILL)");
  EXPECT_TRUE(s.failed());
}

TEST(LauncherExitStatus, ClassifiesSuccessAndPreemption) {
  EXPECT_TRUE(ExitStatus::exited(0).succeeded());
  EXPECT_FALSE(ExitStatus::exited(0).failed());
  EXPECT_TRUE(ExitStatus::exited(kExitPreempted).preempted());
  EXPECT_FALSE(ExitStatus::exited(kExitPreempted).failed());
  EXPECT_TRUE(ExitStatus::exited(1).failed());
  EXPECT_TRUE(ExitStatus::signaled(SIGTERM).failed());
  // A signal whose number happens to be 3 is not a preemption.
  EXPECT_FALSE(ExitStatus::signaled(SIGQUIT).preempted());
}

TEST(LauncherExitStatus, NamesSignals) {
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGABRT), "SIGABRT");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(200), "signal 200");
}

}  // namespace
}  // namespace tenax::launcher
