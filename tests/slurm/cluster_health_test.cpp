// The Slurm fixture's reading of the cluster's health (cluster_health.h), without a cluster:
// sinfo's node lines as Slurm 22.05 prints them, and the slurmd deaths between two readings.
#include "cluster_health.h"

#include <gtest/gtest.h>

namespace {

using namespace tenax::testing::slurm;

TEST(SlurmClusterHealth, ParsesSinfoNodeLinesOncePerNode) {
  const auto nodes = parse_nodes("node1|idle|none\nnode2|down*|Not responding\nnode2|down*|Not responding\ngarbage\n");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].name, "node1");
  EXPECT_EQ(nodes[0].state, "idle");
  EXPECT_EQ(nodes[1].name, "node2");
  EXPECT_EQ(nodes[1].state, "down*");
  EXPECT_EQ(nodes[1].reason, "Not responding");
}

TEST(SlurmClusterHealth, UsableNodesRespondAndTakeJobs) {
  for (const char* state : {"idle", "mixed", "allocated", "completing", "planned", "mixed-", "idle-"}) {
    EXPECT_TRUE(usable({"node1", state, "none"})) << state;
  }
  for (const char* state : {"idle*", "down*", "down", "drained", "draining", "fail", "unknown*", "allocated*"}) {
    EXPECT_FALSE(usable({"node1", state, "none"})) << state;
  }
}

TEST(SlurmClusterHealth, OutOfServiceIsDownDrainOrFail) {
  for (const char* state : {"down", "down*", "drained", "drained*", "draining", "fail", "failing"}) {
    EXPECT_TRUE(out_of_service({"node2", state, "x"})) << state;
  }
  // Not responding yet, but not taken out of service: the node comes back when slurmd answers.
  for (const char* state : {"idle", "idle*", "allocated*", "completing", "planned"}) {
    EXPECT_FALSE(out_of_service({"node2", state, "x"})) << state;
  }
}

TEST(SlurmClusterHealth, ASlurmdGoneOrReplacedBetweenTwoReadingsDied) {
  const SlurmdPids before{{"node1", 100}, {"node2", 200}};
  EXPECT_TRUE(slurmd_deaths(before, before).empty());
  const auto gone = slurmd_deaths(before, {{"node1", 100}, {"node2", 0}});
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_NE(gone[0].find("slurmd of node2 (pid 200) died and is not running"), std::string::npos) << gone[0];
  const auto replaced = slurmd_deaths(before, {{"node1", 100}, {"node2", 300}});
  ASSERT_EQ(replaced.size(), 1u);
  EXPECT_NE(replaced[0].find("runs again as pid 300"), std::string::npos) << replaced[0];
  // A slurmd not running at the first reading did not die in between.
  EXPECT_TRUE(slurmd_deaths({{"node1", 0}}, {{"node1", 0}}).empty());
}

TEST(SlurmClusterHealth, ProblemsNameTheNodeItsStateAndTheReason) {
  const std::vector<NodeStatus> whole{{"node1", "idle", "none"}, {"node2", "mixed-", "none"}};
  EXPECT_TRUE(cluster_problems(whole, {{"node1", 1}, {"node2", 2}}, 2).empty());
  const auto problems = cluster_problems({{"node1", "idle", "none"}, {"node2", "down*", "Not responding"}},
                                         {{"node1", 1}, {"node2", 0}}, 2);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0], "node node2 is down* (reason: Not responding)");
  EXPECT_EQ(problems[1], "slurmd of node2 is not running");
  EXPECT_EQ(cluster_problems({{"node1", "idle", "none"}}, {{"node1", 1}}, 2).at(0), "sinfo lists 1 node(s), not 2");
}

}  // namespace
