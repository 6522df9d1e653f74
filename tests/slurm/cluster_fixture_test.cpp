// The Slurm tests' fixture itself (slurm_cluster.h) on the real local cluster: damage to the
// cluster during a test (a slurmd that died, a node taken out of service) is reported as that
// test's, and the fixture brings the cluster back so that the next test runs on two nodes. The
// cascade it prevents: node2's slurmd died in one test, node2 went DOWN, and the 16 Slurm tests
// after it failed in SetUp for want of 2 nodes.
// Runs alone (RUN_SERIAL, tests/slurm/CMakeLists.txt): it breaks the cluster the other Slurm
// tests share.
#include <gtest/gtest.h>
#include <signal.h>

#include <string>

#include "slurm_cluster.h"

namespace {

using namespace std::chrono_literals;
using namespace tenax::testing::slurm;

class SlurmFixture : public SlurmClusterTest {
 protected:
  // A 2-node job runs on the cluster: both nodes take tasks.
  void expect_a_two_node_job_runs() {
    const std::string o = fresh_out("after-heal").string();
    job_ = run("sbatch --parsable -N2 --ntasks-per-node=1 -t 2 -o " + o +
               "/slurm.out --wrap 'srun --ntasks-per-node=1 hostname' 2>&1");
    ASSERT_EQ(wait_done(60s), "COMPLETED") << explain();
    EXPECT_NE(log().find("node1"), std::string::npos) << explain();
    EXPECT_NE(log().find("node2"), std::string::npos) << explain();
  }

  static bool any_contains(const std::vector<std::string>& lines, const std::string& what) {
    for (const std::string& line : lines) {
      if (line.find(what) != std::string::npos) return true;
    }
    return false;
  }
};

// As in the flake: node2's slurmd gone (SIGKILL: no log line, no core) and node2 DOWN.
TEST_F(SlurmFixture, AKilledSlurmdIsThisTestsDamageAndTheNextTestFindsTwoNodes) {
  const long slurmd = slurmd_pid("node2");
  ASSERT_GT(slurmd, 0) << "no slurmd of node2 (pid file " << SLURM_STATE_DIR << "/run/slurmd-node2.pid)";
  ASSERT_EQ(::kill(static_cast<pid_t>(slurmd), SIGKILL), 0);
  // Until slurmctld shows it: run right after the previous repetition brought node2 back (ctest
  // --repeat), one update was seen not to take (no "down" in the damage, no reason).
  const auto down_by = std::chrono::steady_clock::now() + 10s;
  std::string said;
  do {
    said = run("scontrol update nodename=node2 state=down reason='fixture test: slurmd killed' 2>&1");
    if (run("sinfo -h -n node2 -o %T 2>&1").find("down") != std::string::npos) break;
    std::this_thread::sleep_for(200ms);
  } while (std::chrono::steady_clock::now() < down_by);
  ASSERT_NE(run("sinfo -h -n node2 -o %T 2>&1").find("down"), std::string::npos) << "node2 not down: " << said;
  const auto gone_by = std::chrono::steady_clock::now() + 10s;
  while (slurmd_pid("node2") == slurmd && std::chrono::steady_clock::now() < gone_by) {
    std::this_thread::sleep_for(50ms);
  }
  const std::vector<std::string> damage = cluster_damage();
  EXPECT_TRUE(any_contains(damage, "slurmd of node2 (pid " + std::to_string(slurmd) + ") died and is not running"))
      << joined(damage, "\n");
  EXPECT_TRUE(any_contains(damage, "node node2 is down")) << joined(damage, "\n");
  EXPECT_TRUE(any_contains(damage, "fixture test: slurmd killed")) << joined(damage, "\n");

  // What the next test's SetUp does.
  const std::vector<std::string> found = heal_cluster();
  EXPECT_TRUE(any_contains(found, "slurmd of node2 is not running")) << joined(found, "\n");
  EXPECT_EQ(joined(current_problems(), "; "), "");
  EXPECT_GT(slurmd_pid("node2"), 0);
  expect_a_two_node_job_runs();
}

// A node drained while its slurmd still runs (as "Kill task failed" does): only a resume brings
// it back.
TEST_F(SlurmFixture, ADrainedNodeIsThisTestsDamageAndIsResumedBeforeTheNextTest) {
  const long slurmd = slurmd_pid("node2");
  ASSERT_EQ(run("scontrol update nodename=node2 state=drain reason='fixture test: drained' 2>&1"), "");
  const std::vector<std::string> damage = cluster_damage();
  EXPECT_TRUE(any_contains(damage, "node node2 is drain")) << joined(damage, "\n");
  EXPECT_TRUE(any_contains(damage, "fixture test: drained")) << joined(damage, "\n");

  const std::vector<std::string> found = heal_cluster();
  EXPECT_TRUE(any_contains(found, "node node2 is drain")) << joined(found, "\n");
  EXPECT_EQ(joined(current_problems(), "; "), "");
  EXPECT_EQ(slurmd_pid("node2"), slurmd) << "a running slurmd is left alone";
  expect_a_two_node_job_runs();
}

}  // namespace
