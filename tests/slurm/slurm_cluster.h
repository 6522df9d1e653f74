// The fixture shared by the Slurm integration tests: the local cluster of shared/slurm (slurmctld
// and two slurmd "nodes" on this host), started by the ctest fixture `tenax_slurm_cluster` and
// stopped after it; one job per test, polled with squeue, released early after a requeue (without
// the credential race of issue 12), explained on failure with slurmctld's lines about it.
// Needs SLURM_STATE_DIR and SLURM_LOCAL_CLUSTER defined (tests/slurm/CMakeLists.txt).
// Thread-safety: one test thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>
#include <string>
#include <system_error>
#include <thread>

#include "support/agent_process.h"

namespace tenax::testing::slurm {

inline bool have_slurm() {
  return std::system("command -v sbatch >/dev/null 2>&1 && command -v scontrol >/dev/null 2>&1") == 0;
}

/// `cmd` through the shell; its standard output without trailing blanks.
inline std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, p)) out += buffer;
  ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

/// /tmp/tenax-slurm-<pid>: this test process's jobs, one folder each (every node sees /tmp here).
inline std::filesystem::path base_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::path("/tmp") / ("tenax-slurm-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

class SlurmClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    using namespace std::chrono_literals;
    if (!have_slurm()) {
      GTEST_SKIP() << "Slurm client binaries (sbatch, scontrol) are not installed, so the `slurm` tests cannot run; "
                      "shared/slurm/local-cluster.sh up installs them (apt)";
    }
    ::setenv("SLURM_CONF", (std::filesystem::path(SLURM_STATE_DIR) / "etc" / "slurm.conf").c_str(), 1);
    // The controller answers and both nodes are usable. Not `local-cluster.sh status`: it refuses
    // the states the backfill scheduler gives nodes it sets aside for a waiting job ("planned",
    // "mixed-"), which another test's held or queued job causes under ctest -j2 (seen: two tests
    // failed at once in SetUp while the cluster ran).
    const std::string ready =
        "scontrol ping 2>/dev/null | grep -q 'is UP' && test \"$(sinfo -h -N -o '%N %T' 2>/dev/null | "
        "awk '$2 ~ /^(idle|mixed|allocated|completing|planned)-?$/' | sort -u | wc -l)\" -ge 2";
    ASSERT_EQ(std::system(ready.c_str()), 0)
        << "the local Slurm cluster at " << SLURM_STATE_DIR << " is not up or has no 2 usable nodes (the ctest "
        << "fixture tenax_slurm_cluster starts it: run through ctest -L slurm; `" << SLURM_LOCAL_CLUSTER
        << " status " << SLURM_STATE_DIR << "` says more)";
  }

  void TearDown() override {
    std::error_code ec;
    if (!HasFailure() && !out_.empty()) std::filesystem::remove_all(out_.parent_path(), ec);
  }

  /// A fresh, empty folder for this test's job: base_dir()/name (also out_).
  std::filesystem::path fresh_out(const std::string& name) {
    out_ = base_dir() / name;
    std::filesystem::remove_all(out_);
    std::filesystem::create_directories(out_);
    return out_;
  }

  std::string state() const { return run("squeue -h -t all -j " + job_ + " -o %T 2>/dev/null"); }

  /// Polls the job until it reaches one of `states` (or the deadline); returns the last state.
  std::string wait_for(const std::set<std::string>& states, std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string s;
    while (std::chrono::steady_clock::now() < deadline) {
      s = state();
      if (states.count(s)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return s;
  }

  std::string wait_done(std::chrono::seconds timeout = std::chrono::seconds(60)) const {
    return wait_for({"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}, timeout);
  }

  // Waits until the job is PENDING again after a requeue, then lets it start at once instead
  // of after Slurm's BeginTime hold (cred_expire: 10 s here), but never within the wall-clock
  // second in which it was requeued. The requeue revokes the first run's credential on every
  // slurmd, stamped in whole seconds, and slurmd refuses a launch credential issued in that same
  // second ("Job N already killed, do not launch batch job"); slurmctld then ends the job FAILED
  // with exit code 1 ("Killing non-startable batch JobId=N: Job credential revoked"), Restarts=1,
  // and it never runs again. That was the requeue flake of issue 12: when the first run had
  // already ended by the time Slurm processed the requeue (no KillWait), the job was PENDING
  // within ~0.3 s and `StartTime=now` landed in the revocation's second. Slurm's own hold exists
  // to avoid exactly this, so without the test's shortcut a requeued job never meets it. The job
  // shows PENDING only after the revocation (COMPLETING until every node's epilog is done), so a
  // credential issued once the clock has passed the second it was seen PENDING is newer.
  // `update` (e.g. "TimeLimit=10") is applied to the pending job first. Returns the state seen
  // ("PENDING", or whatever it was at the deadline).
  std::string start_requeued_job_now(std::chrono::seconds timeout, const std::string& update = "") const {
    const std::string pending = wait_for({"PENDING"}, timeout);
    if (pending != "PENDING") return pending;
    if (!update.empty()) run("scontrol update JobId=" + job_ + " " + update + " 2>&1");
    const auto seen = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    while (std::chrono::system_clock::to_time_t(std::chrono::system_clock::now()) <= seen) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    run("scontrol update JobId=" + job_ + " StartTime=now 2>&1");
    return pending;
  }

  std::string log() const { return read_text(out_ / "slurm.out"); }
  std::string explain() const {
    // slurmctld's lines about the job say why Slurm ended or held it (e.g. a revoked credential).
    return "job " + job_ + " state " + state() + "\n--- slurm.out ---\n" + log() + "\n--- scontrol ---\n" +
           run("scontrol show job " + job_) + "\n--- slurmctld.log (JobId=" + job_ + ") ---\n" +
           run("grep -w 'JobId=" + job_ + "' " SLURM_STATE_DIR "/log/slurmctld.log 2>/dev/null | tail -n 20");
  }

  std::filesystem::path out_;
  std::string job_;
};

}  // namespace tenax::testing::slurm
