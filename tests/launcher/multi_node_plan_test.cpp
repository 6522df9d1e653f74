#include "multi_node_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

using Args = std::vector<std::string>;

RunOptions parse(Args flags) {
  flags.insert(flags.end(), {"--", "app"});
  return parse_run_options(flags);
}

SlurmJob job(int node_id) {
  SlurmJob j;
  j.job_id = "17";
  j.node_id = node_id;
  j.num_nodes = 2;
  j.nodes = {"node1", "node2"};
  j.node_name = node_id == 0 ? "node1" : "node2";
  return j;
}

TEST(LauncherMultiNodePlan, SingleNodeWithoutFlagsOrSlurm) {
  EXPECT_FALSE(plan_multi_node(parse({"--nproc-per-node", "2"}), std::nullopt, "h", 1).has_value());
}

TEST(LauncherMultiNodePlan, ParsesTheMultiNodeFlags) {
  RunOptions o = parse({"--nproc-per-node", "1", "--nnodes", "1:3", "--node-id", "2", "--rdzv-endpoint", "host-a:29500",
                        "--rdzv-host", "no", "--heartbeat-interval", "100", "--heartbeat-liveness", "4",
                        "--join-timeout", "20", "--hang-timeout", "60"});
  EXPECT_EQ(o.nnodes, (NodeRange{1, 3}));
  EXPECT_EQ(o.node_id, "2");
  EXPECT_EQ(o.rdzv_endpoint, "host-a:29500");
  EXPECT_EQ(o.rdzv_host, RdzvHosting::kNo);
  EXPECT_EQ(o.heartbeat_interval, std::chrono::milliseconds(100));
  EXPECT_EQ(o.heartbeat_liveness, 4);
  EXPECT_EQ(o.join_timeout, std::chrono::seconds(20));
  EXPECT_EQ(o.hang_timeout, std::chrono::seconds(60));
  EXPECT_EQ(parse({"--nproc-per-node", "1", "--nnodes", "2"}).nnodes, (NodeRange{2, 2}));
  EXPECT_EQ(parse({"--nproc-per-node", "1", "--rdzv-endpoint", "tcp://h:1"}).rdzv_endpoint, "h:1");
}

TEST(LauncherMultiNodePlan, BadMultiNodeFlagsAreNamed) {
  auto error_of = [](Args flags) -> std::string {
    try {
      parse(std::move(flags));
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error_of({"--nproc-per-node", "1", "--nnodes", "3:2"}).find("MIN is above MAX"), std::string::npos);
  EXPECT_NE(error_of({"--nproc-per-node", "1", "--nnodes", "0"}).find("--nnodes"), std::string::npos);
  EXPECT_NE(error_of({"--nproc-per-node", "1", "--rdzv-endpoint", "nohost"}).find("HOST:PORT"), std::string::npos);
  EXPECT_NE(error_of({"--nproc-per-node", "1", "--rdzv-endpoint", "h:99999"}).find("HOST:PORT"), std::string::npos);
  EXPECT_NE(error_of({"--nproc-per-node", "1", "--rdzv-host", "maybe"}).find("yes, no or auto"), std::string::npos);
  EXPECT_NE(error_of({"--nproc-per-node", "1", "--heartbeat-liveness", "1"}).find("at least 2"), std::string::npos);
}

TEST(LauncherMultiNodePlan, SlurmGivesNodeIdCountAndFirstHost) {
  auto rank0 = plan_multi_node(parse({"--nproc-per-node", "2"}), job(0), "node1", 7);
  ASSERT_TRUE(rank0.has_value());
  EXPECT_EQ(rank0->nodes, (NodeRange{2, 2}));
  EXPECT_EQ(rank0->node_id, "node-000000");
  EXPECT_EQ(rank0->host, "node1");
  EXPECT_TRUE(rank0->hosts_service);
  EXPECT_EQ(rank0->connect_endpoint(), "tcp://node1:" + std::to_string(kSlurmRdzvPortBase + 17));
  EXPECT_EQ(rank0->rdzv_bind, "tcp://*:" + std::to_string(kSlurmRdzvPortBase + 17));

  auto rank1 = plan_multi_node(parse({"--nproc-per-node", "2", "--nnodes", "1:2"}), job(1), "node2", 8);
  ASSERT_TRUE(rank1.has_value());
  EXPECT_EQ(rank1->nodes, (NodeRange{1, 2}));
  EXPECT_EQ(rank1->node_id, "node-000001");
  EXPECT_EQ(rank1->host, "node2");
  EXPECT_FALSE(rank1->hosts_service);
  EXPECT_EQ(rank1->connect_endpoint(), rank0->connect_endpoint());
  EXPECT_TRUE(rank1->rdzv_bind.empty());

  // Flags win over Slurm.
  auto moved = plan_multi_node(parse({"--nproc-per-node", "1", "--rdzv-endpoint", "node2:5000", "--rdzv-host", "yes"}),
                               job(1), "node2", 8);
  EXPECT_TRUE(moved->hosts_service);
  EXPECT_EQ(moved->connect_endpoint(), "tcp://node2:5000");
  EXPECT_THROW(plan_multi_node(parse({"--nproc-per-node", "1", "--nnodes", "1"}), job(0), "node1", 7), ConfigError)
      << "2 nodes in the step but MAX 1";
}

TEST(LauncherMultiNodePlan, WithoutSlurmTheEndpointIsNeededBeyondOneNode) {
  auto host = plan_multi_node(
      parse({"--nproc-per-node", "1", "--nnodes", "2", "--node-id", "0", "--rdzv-endpoint", "127.0.0.1:29555"}),
      std::nullopt, "box", 3);
  ASSERT_TRUE(host.has_value());
  EXPECT_TRUE(host->hosts_service);
  EXPECT_EQ(host->rdzv_bind, "tcp://127.0.0.1:29555");
  auto other = plan_multi_node(
      parse({"--nproc-per-node", "1", "--nnodes", "2", "--node-id", "1", "--rdzv-endpoint", "127.0.0.1:29555"}),
      std::nullopt, "box", 4);
  EXPECT_FALSE(other->hosts_service);
  EXPECT_EQ(other->node_id, "node-000001");
  EXPECT_THROW(plan_multi_node(parse({"--nproc-per-node", "1", "--nnodes", "2"}), std::nullopt, "box", 3), ConfigError);
  // One node, no endpoint: hosts its own service on any free port.
  auto alone = plan_multi_node(parse({"--nproc-per-node", "1", "--nnodes", "1"}), std::nullopt, "box", 3);
  EXPECT_TRUE(alone->hosts_service);
  EXPECT_EQ(alone->node_id, "box-3");
  EXPECT_EQ(alone->connect_endpoint(4242), "tcp://127.0.0.1:4242");
}

// Failover order and addresses (host_election.h): the node-list position, who may take over.
TEST(LauncherMultiNodePlan, EveryNodeKnowsItsPlaceInTheFailoverOrder) {
  auto rank1 = plan_multi_node(parse({"--nproc-per-node", "1"}), job(1), "node2", 8);
  EXPECT_EQ(rank1->position, 1);
  EXPECT_TRUE(rank1->may_host);
  auto numbered = plan_multi_node(parse({"--nproc-per-node", "1", "--nnodes", "2", "--node-id", "5", "--rdzv-endpoint",
                                         "10.0.0.1:1", "--node-host", "10.77.0.12"}),
                                  std::nullopt, "box", 4);
  EXPECT_EQ(numbered->position, 5);
  EXPECT_EQ(numbered->host, "10.77.0.12");
  auto standalone = plan_multi_node(parse({"--nproc-per-node", "1", "--nnodes", "2", "--node-id", "0",
                                           "--rdzv-endpoint", "h:1", "--rdzv-host", "no"}),
                                    std::nullopt, "box", 4);
  EXPECT_FALSE(standalone->may_host);
}

// A Slurm step with fewer nodes than MIN can never form a generation: a configuration error at
// once (exit 2), not a wait for the join timeout followed by requeues.
TEST(LauncherMultiNodePlan, ASlurmStepBelowTheMinimumIsRefusedAtOnce) {
  try {
    (void)plan_multi_node(parse({"--nproc-per-node", "1", "--nnodes", "3:4"}), job(0), "node1", 7);
    FAIL() << "a 2-node step was accepted for --nnodes 3:4";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("the Slurm step has 2 nodes but --nnodes needs at least 3"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tenax::launcher
