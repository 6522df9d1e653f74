// The fixture shared by the Slurm integration tests: the local cluster of shared/slurm (slurmctld
// and two slurmd "nodes" on this host), started by the ctest fixture `tenax_slurm_cluster` and
// stopped after it; one job per test, polled with squeue, released early after a requeue (without
// the credential race of issue 12), explained on failure with slurmctld's lines about it.
// The cluster is checked around every test: a slurmd that died or a node Slurm took out of
// service during a test fails that test (with the node's log), and a cluster found broken
// before a test is brought back first (missing daemons restarted, nodes resumed), with a line in
// the test's output and in SLURM_STATE_DIR/log/fixture.log, so that one fault fails one test and
// not every later one.
// Needs SLURM_STATE_DIR, SLURM_LOCAL_CLUSTER and SLURM_PORT defined (tests/slurm/CMakeLists.txt).
// Thread-safety: one test thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cluster_health.h"
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

/// The node names of the cluster's slurm.conf (its NodeName= lines).
inline std::vector<std::string> configured_nodes() {
  std::vector<std::string> nodes;
  std::ifstream conf(std::filesystem::path(SLURM_STATE_DIR) / "etc" / "slurm.conf");
  for (std::string line; std::getline(conf, line);) {
    if (line.rfind("NodeName=", 0) == 0) nodes.push_back(line.substr(9, line.find(' ') - 9));
  }
  return nodes;
}

/// The pid of `node`'s slurmd, from the pid file local-cluster.sh gives it, if that process runs
/// (not a zombie) and is that node's slurmd (a recycled pid is not); 0 otherwise.
inline long slurmd_pid(const std::string& node) {
  const auto state = std::filesystem::path(SLURM_STATE_DIR);
  const long pid = std::strtol(read_text(state / "run" / ("slurmd-" + node + ".pid")).c_str(), nullptr, 10);
  if (pid <= 0) return 0;
  const std::string proc = "/proc/" + std::to_string(pid);
  const std::string stat = read_text(proc + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') return 0;
  std::string cmdline = read_text(proc + "/cmdline");
  for (char& c : cmdline) c = c == '\0' ? ' ' : c;
  const bool ours = cmdline.find("slurmd ") != std::string::npos && cmdline.find(state.string()) != std::string::npos &&
                    cmdline.find("-N " + node + " ") != std::string::npos;
  return ours ? pid : 0;
}

/// Each configured node's slurmd pid (0: not running).
inline SlurmdPids slurmd_pids() {
  SlurmdPids pids;
  for (const std::string& node : configured_nodes()) pids[node] = slurmd_pid(node);
  return pids;
}

inline std::vector<NodeStatus> node_status() {
  return parse_nodes(run(std::string("sinfo -h -N -o '") + kSinfoNodeFormat + "' 2>/dev/null"));
}

/// Everything that keeps the cluster from running a 2-node job now (empty: it is whole).
inline std::vector<std::string> current_problems() {
  std::vector<std::string> problems;
  if (std::system("scontrol ping 2>/dev/null | grep -q 'is UP'") != 0) problems.push_back("slurmctld does not answer");
  for (std::string& p : cluster_problems(node_status(), slurmd_pids(), 2)) problems.push_back(std::move(p));
  return problems;
}

inline std::string joined(const std::vector<std::string>& lines, const std::string& separator) {
  std::string out;
  for (const std::string& line : lines) out += (out.empty() ? "" : separator) + line;
  return out;
}

/// Pids of the slurmstepd processes of job `job` on this host (every node of the local cluster is
/// this host), found by their process titles: "slurmstepd: [279.0]", "slurmstepd: [279.batch]".
inline std::vector<long> slurmstepds_of(const std::string& job) {
  std::vector<long> pids;
  const std::string title = "slurmstepd: [" + job + ".";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (read_text(entry.path() / "cmdline").rfind(title, 0) == 0) pids.push_back(std::stol(name));
  }
  return pids;
}

/// `what`, stamped with the time and the running test, on stderr (ctest shows it with the
/// test's output) and in SLURM_STATE_DIR/log/fixture.log (one file for the whole run).
inline void fixture_log(const std::string& what) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = test ? std::string(test->test_suite_name()) + "." + test->name() : "?";
  std::cerr << "[slurm fixture] " << what << std::endl;
  std::ofstream(std::filesystem::path(SLURM_STATE_DIR) / "log" / "fixture.log", std::ios::app)
      << run("date -u +%T.%3N") << " " << name << " (pid " << ::getpid() << "): " << what << "\n";
}

/// What a node's slurmd (pid `pid`, 0 if unknown) left behind: the last lines of its log and
/// console, the signals sent to it with their senders (signals.log: tests/slurm/signal_watch.sh;
/// a SIGKILL or an unhandled SIGUSR1 kills slurmd without a line in its log), and the kernel's
/// lines about slurm processes (a segfault or the OOM killer shows there when no core is written).
inline std::string slurmd_evidence(const std::string& node, long pid) {
  const std::string dir = std::string(SLURM_STATE_DIR) + "/log/";
  const std::string log = dir + "slurmd-" + node;
  std::string text = "\n--- tail " + log + ".log ---\n" + run("grep -v pmix " + log + ".log 2>/dev/null | tail -n 15") +
                     "\n--- tail " + log + ".console ---\n" + run("tail -n 5 " + log + ".console 2>/dev/null");
  if (pid > 0) {
    text += "\n--- signals to pid " + std::to_string(pid) + " (" + dir + "signals.log: sender, sig, target) ---\n" +
            run("grep -E ' pid=" + std::to_string(pid) + " ' " + dir + "signals.log 2>/dev/null | tail -n 8");
  }
  return text + "\n--- dmesg (slurm) ---\n" + run("dmesg 2>/dev/null | grep -i slurm | tail -n 5");
}

/// Brings a broken cluster back: resumes the nodes Slurm took out of service and restarts the
/// daemons that died (`local-cluster.sh up`: state kept, running daemons untouched, /etc/hosts
/// left alone so that a concurrent test's jobs never miss their node names), then waits (90 s at
/// most) until the cluster is whole and no node is still completing a job. Returns the problems
/// it found (empty: nothing was wrong).
inline std::vector<std::string> heal_cluster() {
  using namespace std::chrono_literals;
  const std::vector<std::string> found = current_problems();
  if (found.empty()) return found;
  fixture_log("the cluster is not whole before this test: " + joined(found, "; ") +
              ". The test that was running when that happened has failed for it; bringing the cluster back");
  for (const NodeStatus& node : node_status()) {
    if (out_of_service(node)) {
      fixture_log("resuming " + node.name + " (" + node.state + ", reason: " + node.reason + ") " +
                  run("scontrol update nodename=" + node.name + " state=resume 2>&1"));
    }
  }
  // The port as the ctest fixture gave it: another configuration would make `up` restart the
  // whole cluster, killing the jobs of a test running beside this one.
  fixture_log("local-cluster.sh up: " + run("SLURM_LOCAL_PORT=" SLURM_PORT
                                            " SLURM_LOCAL_ETC_HOSTS=0 SLURM_LOCAL_TIMEOUT=30 " SLURM_LOCAL_CLUSTER
                                            " up " SLURM_STATE_DIR " 2>&1"));
  // Whole, and done with the jobs of the broken run: a job that ran on a node whose slurmd died
  // holds it COMPLETING until slurmctld sends the new slurmd its TERMINATE_JOB again (seen: 46 s
  // after the restart), and the next test's job would wait behind it, eating its own deadlines.
  const auto settled = [] {
    std::vector<std::string> left = current_problems();
    for (const NodeStatus& node : node_status()) {
      if (base_state(node.state) == "completing") left.push_back("node " + node.name + " is still completing a job");
    }
    return left;
  };
  const auto started = std::chrono::steady_clock::now();
  std::vector<std::string> left = settled();
  while (!left.empty() && std::chrono::steady_clock::now() - started < 90s) {
    std::this_thread::sleep_for(200ms);
    left = settled();
  }
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
  fixture_log(left.empty() ? "the cluster is whole again (" + std::to_string(took.count()) + " s)"
                           : "the cluster is still not whole after " + std::to_string(took.count()) +
                                 " s: " + joined(left, "; "));
  return found;
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
    // An earlier test (or one beside this one under ctest -j2) may have lost a slurmd: that test
    // failed for it (TearDown below); this one starts on a whole cluster again.
    heal_cluster();
    // The controller answers, both nodes are usable and their slurmd run. Not `local-cluster.sh
    // status`: it refuses the states the backfill scheduler gives nodes it sets aside for a
    // waiting job ("planned", "mixed-"), which another test's held or queued job causes under
    // ctest -j2 (seen: two tests failed at once in SetUp while the cluster ran).
    const std::vector<std::string> problems = current_problems();
    ASSERT_TRUE(problems.empty()) << "the local Slurm cluster at " << SLURM_STATE_DIR
                                  << " is not whole: " << joined(problems, "; ")
                                  << " (the ctest fixture tenax_slurm_cluster starts it: "
                                  << "run through ctest -L slurm; `" << SLURM_LOCAL_CLUSTER << " status "
                                  << SLURM_STATE_DIR << "` says more)";
    slurmd_at_start_ = slurmd_pids();
    watching_ = true;
  }

  void TearDown() override {
    // A slurmd that died, or a node Slurm took out of service, while this test ran is this test's
    // failure (or that of a test running beside it), never a silent one: without this check only
    // the tests after it failed, each for want of a node.
    for (const std::string& damage : cluster_damage()) {
      ADD_FAILURE() << damage << "\n(the fixture brings the cluster back before the next test)";
    }
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

  /// Polls until the job is PENDING with at least one restart behind it (or the deadline);
  /// returns "PENDING", or the last state seen.
  std::string wait_for_requeued(std::chrono::seconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    const std::regex job_state(R"(\bJobState=(\S+))"), restarts(R"(\bRestarts=(\d+))");
    std::string s;
    while (std::chrono::steady_clock::now() < deadline) {
      const std::string text = run("scontrol show job -o " + job_ + " 2>/dev/null");
      std::smatch state_match, restarts_match;
      s = std::regex_search(text, state_match, job_state) ? state_match.str(1) : "";
      if (s == "PENDING" && std::regex_search(text, restarts_match, restarts) &&
          std::stoi(restarts_match.str(1)) >= 1) {
        return s;
      }
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
  // Nor before every node is done with the first run: a slurmstepd of that run can outlive the
  // requeue on a loaded node (seen with stress-ng beside the tests: node2 logged the old step's
  // "[279.0] done with job" 0.1 s after the requeued run's step 279.0 had been launched there).
  // The same job id is the same freezer cgroup (slurm_node2/uid_0/job_279/step_0), which the old
  // step removed under the new one: "proctrack_g_add: Bad address", "Slurmd could not execve
  // job", and that rank never ran. So the job is released once no slurmstepd of it is left (30 s
  // at most; all nodes are this host).
  // `update` (e.g. "TimeLimit=10") is applied to the pending job first. Returns the state seen
  // ("PENDING", or whatever it was at the deadline).
  // PENDING means after a requeue (Restarts >= 1), not the PENDING of the submission: a job whose
  // first run had not started yet is PENDING too, and a test that called this right after sbatch
  // then released it at once; its StartTime=now fell in the second of the requeue that followed
  // (10:47:11.034 against 11.031): a revoked credential, the job FAILED, its second run never ran.
  std::string start_requeued_job_now(std::chrono::seconds timeout, const std::string& update = "") const {
    using namespace std::chrono_literals;
    const std::string pending = wait_for_requeued(timeout);
    if (pending != "PENDING") return pending;
    const auto drained_by = std::chrono::steady_clock::now() + 30s;
    while (!slurmstepds_of(job_).empty() && std::chrono::steady_clock::now() < drained_by) {
      std::this_thread::sleep_for(100ms);
    }
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

  /// What happened to the cluster since SetUp (or the last call): one entry per slurmd that
  /// died and per node Slurm has taken out of service, with that node's logs; each also goes to
  /// the fixture's log. Empty when nothing did, or when SetUp did not get as far as to look.
  std::vector<std::string> cluster_damage() {
    std::vector<std::string> damage;
    if (!watching_) return damage;
    const SlurmdPids now = slurmd_pids();
    for (const auto& [node, pid] : slurmd_at_start_) {
      for (const std::string& death : slurmd_deaths({{node, pid}}, now)) {
        fixture_log(death + " while this test ran");
        damage.push_back(death + " while this test ran (or one beside it under ctest -j2)" +
                         slurmd_evidence(node, pid));
      }
    }
    for (const NodeStatus& node : node_status()) {
      if (!out_of_service(node)) continue;
      const std::string what = "node " + node.name + " is " + node.state + " (reason: " + node.reason + ")";
      fixture_log(what + " after this test");
      const auto seen = slurmd_at_start_.find(node.name);
      damage.push_back(what + " after this test" +
                       slurmd_evidence(node.name, seen == slurmd_at_start_.end() ? 0 : seen->second));
    }
    slurmd_at_start_ = now;
    return damage;
  }

  std::filesystem::path out_;
  std::string job_;

 private:
  SlurmdPids slurmd_at_start_;  ///< each node's slurmd when the test began (SetUp)
  bool watching_ = false;       ///< SetUp got that far: TearDown checks the cluster
};

}  // namespace tenax::testing::slurm
