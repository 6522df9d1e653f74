// kill -9 of a checkpoint writer at 50 different points during saves (DESIGN.md 5: "a crash at
// any instant leaves the old or the new checkpoint, never a half one that loads").
//
// crash_saver (two ranks, back-to-back saves with retention) is started 50 times on the same
// output directory and SIGKILLed after a delay that sweeps three save durations in 50 steps,
// so the kills land in every phase: snapshot, shard writes, reports, manifest, rename,
// `latest`, pruning. After every kill: each committed checkpoint verifies completely, and the
// next run loads the newest one and finds every tensor holding the value of its step.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tenax/core/unique_fd.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// A running crash_saver with its stdout readable line by line.
class Saver {
 public:
  Saver(const fs::path& out, int generation, const std::string& count = "") {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    tenax::UniqueFd read_end(fds[0]);
    tenax::UniqueFd write_end(fds[1]);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(write_end.get(), STDOUT_FILENO);
      read_end.reset();
      write_end.reset();
      const std::string gen = std::to_string(generation);
      if (count.empty()) {
        ::execl(CRASH_SAVER_BINARY, CRASH_SAVER_BINARY, out.c_str(), gen.c_str(), static_cast<char*>(nullptr));
      } else {
        ::execl(CRASH_SAVER_BINARY, CRASH_SAVER_BINARY, out.c_str(), gen.c_str(), count.c_str(),
                static_cast<char*>(nullptr));
      }
      ::_exit(127);
    }
    write_end.reset();
    out_ = ::fdopen(read_end.release(), "r");  // the FILE owns the descriptor from here
  }
  ~Saver() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      wait_status();
    }
    if (out_) std::fclose(out_);
  }
  // The next line of output without its newline; "" at end of output.
  std::string line() {
    char buf[512];
    if (!out_ || !std::fgets(buf, sizeof buf, out_)) return "";
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  void kill9() { ::kill(pid_, SIGKILL); }
  int wait_status() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    return status;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  bool reaped_ = false;
};

// Every committed checkpoint verifies; returns how many there are.
int verify_committed(const fs::path& root) {
  tenax::storage::CheckpointDirectory dir(root);
  int n = 0;
  for (auto step : dir.committed_steps()) {
    auto reader = tenax::storage::CheckpointReader::open(dir.step_dir(step));
    EXPECT_TRUE(reader.is_ok()) << "step " << step << ": " << reader.status().to_string();
    if (!reader.is_ok()) continue;
    const auto status = reader.value().verify_all();
    EXPECT_TRUE(status.is_ok()) << "step " << step << ": " << status.to_string();
    ++n;
  }
  return n;
}

TEST(IntegrationSaveCrash, KillNineAtFiftyPointsNeverLeavesAHalfCheckpointThatLoads) {
  const fs::path out = fs::path(::testing::TempDir()) / ("tenax-save-crash-" + std::to_string(::getpid()));
  fs::remove_all(out);
  const fs::path root = out / "checkpoints";

  // Probe: how long one save takes here (10 saves, uninterrupted).
  std::chrono::microseconds per_save{};
  {
    Saver probe(out, 0, "10");
    ASSERT_EQ(probe.line(), "loaded none");
    ASSERT_EQ(probe.line(), "ready");
    const auto start = Clock::now();
    for (int i = 1; i <= 10; ++i) ASSERT_EQ(probe.line(), "saved " + std::to_string(i));
    per_save = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start) / 10;
    const int status = probe.wait_status();
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::printf("one save of ~16 MiB by 2 ranks takes %lld us here\n", static_cast<long long>(per_save.count()));

  std::int64_t last_loaded = 10;
  int kills_after_a_commit_in_that_run = 0;
  for (int i = 0; i < 50; ++i) {
    Saver saver(out, i + 1);
    const std::string first = saver.line();
    ASSERT_EQ(first.rfind("loaded ", 0), 0u) << "run " << i << ": " << first;
    ASSERT_NE(first, "loaded none") << "run " << i << ": the committed checkpoints were lost";
    const std::int64_t loaded = std::stoll(first.substr(7));
    EXPECT_GE(loaded, last_loaded) << "run " << i << " resumed from an older checkpoint than it had";
    last_loaded = loaded;
    ASSERT_EQ(saver.line(), "ready");
    std::this_thread::sleep_for(per_save * 3 * i / 50);  // 0 .. 3 saves into the loop
    saver.kill9();
    const int status = saver.wait_status();
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "run " << i << " was not killed mid-run";
    ASSERT_GE(verify_committed(root), 1) << "after kill " << i;
    // Anything not committed must not count. A leftover may hold a manifest only under a name
    // the loader never considers: ".tmp-step-*" (killed between the manifest and the rename)
    // or ".old-step-*" (killed while a replaced or pruned checkpoint was being deleted).
    tenax::storage::CheckpointDirectory dir(root);
    for (const auto& p : dir.uncommitted_dirs()) {
      const std::string name = p.filename().string();
      const bool hidden = name.rfind(".tmp-step-", 0) == 0 || name.rfind(".old-step-", 0) == 0;
      EXPECT_TRUE(hidden || !fs::exists(p / tenax::storage::kManifestFile)) << p;
    }
    if (dir.latest_step() && *dir.latest_step() > loaded) ++kills_after_a_commit_in_that_run;
  }
  // The last word: a final run loads a consistent newest checkpoint (exit 3 would mean it found
  // one whose tensors do not belong to its step).
  Saver final_run(out, 99, "1");
  const std::string first = final_run.line();
  EXPECT_EQ(first.rfind("loaded ", 0), 0u) << first;
  const int status = final_run.wait_status();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  std::printf("50 kills; %d of them after the killed run had committed at least once\n",
              kills_after_a_commit_in_that_run);
  // The sweep must really cover saves in progress, not only the time before the first one.
  EXPECT_GE(kills_after_a_commit_in_that_run, 10);
  fs::remove_all(out);
}

// EACCES, for real: the writer runs as an unprivileged user (root ignores file modes) over a
// root-owned checkpoint directory it can read but not write.
TEST(IntegrationSaveFaults, PermissionDeniedFailsClearlyAndKeepsThePrevious) {
  if (::geteuid() != 0) GTEST_SKIP() << "switching to user nobody needs root (CI runs as root)";
  const fs::path out = fs::path("/tmp") / ("tenax-eacces-" + std::to_string(::getpid()));
  fs::remove_all(out);
  {
    Saver first(out, 0, "1");  // as root: one committed checkpoint
    while (!first.line().empty()) {
    }
    ASSERT_EQ(first.wait_status(), 0);
  }
  fs::permissions(out, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  const fs::path log = out.string() + ".log";
  const std::string cmd = "runuser -u nobody -- " + std::string(CRASH_SAVER_BINARY) + " '" + out.string() +
                          "' 1 1 > '" + log.string() + "' 2>&1";
  const int status = std::system(cmd.c_str());
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 1) << output;
  EXPECT_NE(output.find("loaded 1"), std::string::npos) << "it could read the checkpoint\n" << output;
  EXPECT_NE(output.find("Permission denied"), std::string::npos) << output;
  EXPECT_NE(output.find("not committed"), std::string::npos) << output;
  EXPECT_EQ(verify_committed(out / "checkpoints"), 1);
  EXPECT_EQ(tenax::storage::CheckpointDirectory(out / "checkpoints").latest_step(), 1);
  fs::remove_all(out);
  fs::remove(log);
}

}  // namespace
