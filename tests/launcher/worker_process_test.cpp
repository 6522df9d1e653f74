#include "worker_process.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

using namespace std::chrono_literals;

// Polls until the worker ends. The deadline only guards against a hung test; it is not a timing
// assertion.
ExitStatus wait_for(WorkerProcess& worker) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (auto status = worker.poll()) return *status;
    std::this_thread::sleep_for(5ms);
  }
  ADD_FAILURE() << "worker did not end";
  return ExitStatus::exited(255);
}

std::string temp_file(const std::string& name) {
  return ::testing::TempDir() + "/launcher_wp_" + std::to_string(::getpid()) + "_" + name;
}

bool wait_for_file(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::access(path.c_str(), F_OK) == 0) return true;
    std::this_thread::sleep_for(5ms);
  }
  return false;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// Running, as opposed to gone or a zombie waiting for a parent (maybe a container's PID 1 that
// never reaps) to collect it.
bool process_running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
}

TEST(LauncherWorkerProcess, ReportsExitCodeAndPassesExactEnvironment) {
  const std::string out = temp_file("env");
  auto worker =
      WorkerProcess::spawn({"/bin/sh", "-c", "echo \"$ONLY_THIS:$HOME\" > " + out + "; exit 7"}, {"ONLY_THIS=yes"});
  EXPECT_EQ(wait_for(worker), ExitStatus::exited(7));
  EXPECT_TRUE(worker.reap());
  std::ifstream in(out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "yes:");  // HOME not inherited: the env is exactly what was given
}

TEST(LauncherWorkerProcess, RunsInItsOwnProcessGroup) {
  auto worker = WorkerProcess::spawn({"/bin/sh", "-c", "sleep 60"}, {});
  EXPECT_EQ(::getpgid(worker.pid()), worker.pid());
  EXPECT_NE(::getpgid(worker.pid()), ::getpgrp());
  worker.signal_group(SIGKILL);
  EXPECT_EQ(wait_for(worker), ExitStatus::signaled(SIGKILL));
}

TEST(LauncherWorkerProcess, GroupSignalReachesGrandchildren) {
  const std::string pid_file = temp_file("grandchild");
  // The shell starts a background sleep (a grandchild of ours), records its pid, then waits.
  auto worker = WorkerProcess::spawn(
      {"/bin/sh", "-c", "sleep 60 & echo $! > " + pid_file + ".tmp; mv " + pid_file + ".tmp " + pid_file + "; wait"},
      {"PATH=/usr/bin:/bin"});
  ASSERT_TRUE(wait_for_file(pid_file));
  pid_t grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  ASSERT_GT(grandchild, 0);
  worker.signal_group(SIGTERM);
  EXPECT_EQ(wait_for(worker), ExitStatus::signaled(SIGTERM));
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (process_running(grandchild) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_FALSE(process_running(grandchild)) << "grandchild " << grandchild << " survived";
}

TEST(LauncherWorkerProcess, PollDoesNotReapSoThePidStaysReserved) {
  auto worker = WorkerProcess::spawn({"/bin/sh", "-c", "exit 0"}, {});
  EXPECT_TRUE(wait_for(worker).succeeded());
  EXPECT_TRUE(process_exists(worker.pid()));  // a zombie still holds the pid
  EXPECT_FALSE(worker.reaped());
  EXPECT_TRUE(worker.reap());
  EXPECT_TRUE(worker.reaped());
  EXPECT_TRUE(worker.status()->succeeded());
}

TEST(LauncherWorkerProcess, DestructorKillsARunningWorker) {
  pid_t pid = 0;
  {
    auto worker = WorkerProcess::spawn({"/bin/sh", "-c", "trap '' TERM; sleep 60"}, {});
    pid = worker.pid();
    ASSERT_TRUE(process_exists(pid));
  }
  EXPECT_FALSE(process_exists(pid)) << "pid " << pid << " outlived its WorkerProcess";
}

TEST(LauncherWorkerProcess, MoveTransfersOwnership) {
  auto a = WorkerProcess::spawn({"/bin/sh", "-c", "exit 4"}, {});
  const pid_t pid = a.pid();
  WorkerProcess b = std::move(a);
  EXPECT_EQ(b.pid(), pid);
  EXPECT_EQ(a.pid(), -1);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(wait_for(b), ExitStatus::exited(4));
}

TEST(LauncherWorkerProcess, MissingProgramThrowsNamingIt) {
  try {
    WorkerProcess::spawn({"tenax-no-such-program-xyz"}, {"PATH=/usr/bin:/bin"});
    ADD_FAILURE() << "no exception";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tenax-no-such-program-xyz"), std::string::npos);
  }
}

}  // namespace
}  // namespace tenax::launcher
