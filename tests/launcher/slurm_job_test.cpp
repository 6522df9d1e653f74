#include "slurm_job.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

using Hosts = std::vector<std::string>;

std::string error_of(const std::string& list) {
  try {
    expand_nodelist(list);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for '" << list << "'";
  return "";
}

TEST(LauncherSlurmNodelist, PlainNamesAndCommas) {
  EXPECT_EQ(expand_nodelist("node1"), Hosts{"node1"});
  EXPECT_EQ(expand_nodelist("a,b,c"), (Hosts{"a", "b", "c"}));
  EXPECT_EQ(expand_nodelist("n-1.cluster,gpu_2"), (Hosts{"n-1.cluster", "gpu_2"}));
}

TEST(LauncherSlurmNodelist, RangesKeepTheirZeroPadding) {
  EXPECT_EQ(expand_nodelist("node[1-2]"), (Hosts{"node1", "node2"}));
  EXPECT_EQ(expand_nodelist("node[01-03]"), (Hosts{"node01", "node02", "node03"}));
  EXPECT_EQ(expand_nodelist("node[08-11]"), (Hosts{"node08", "node09", "node10", "node11"}));
  EXPECT_EQ(expand_nodelist("node[8-11]"), (Hosts{"node8", "node9", "node10", "node11"}));
  EXPECT_EQ(expand_nodelist("n[001-002]"), (Hosts{"n001", "n002"}));
  EXPECT_EQ(expand_nodelist("n[5]"), Hosts{"n5"});
  EXPECT_EQ(expand_nodelist("n[0]"), Hosts{"n0"});
}

TEST(LauncherSlurmNodelist, CommasInsideAndOutsideBrackets) {
  EXPECT_EQ(expand_nodelist("node[01-03,7],gpu-a[1-2]x"),
            (Hosts{"node01", "node02", "node03", "node7", "gpu-a1x", "gpu-a2x"}));
  EXPECT_EQ(expand_nodelist("a[1,3,5-6],b"), (Hosts{"a1", "a3", "a5", "a6", "b"}));
  EXPECT_EQ(expand_nodelist("login,node[1-2],gpu[10-11]"), (Hosts{"login", "node1", "node2", "gpu10", "gpu11"}));
}

TEST(LauncherSlurmNodelist, SeveralBracketGroupsMultiplyInOrder) {
  EXPECT_EQ(expand_nodelist("rack[1-2]-node[01-02]"),
            (Hosts{"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"}));
  EXPECT_EQ(expand_nodelist("r[1,3]n[5]x"), (Hosts{"r1n5x", "r3n5x"}));
}

TEST(LauncherSlurmNodelist, MalformedListsAreRefusedWithThePosition) {
  EXPECT_NE(error_of("node[1-2").find("'[' without ']'"), std::string::npos);
  EXPECT_NE(error_of("node1-2]").find("']' without '['"), std::string::npos);
  EXPECT_NE(error_of("node[[1]]").find("nested"), std::string::npos);
  EXPECT_NE(error_of("node[3-1]").find("goes down"), std::string::npos);
  EXPECT_NE(error_of("node[a-b]").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("node[]").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("node[1-]").find("not a number"), std::string::npos);
  EXPECT_NE(error_of("a,,b").find("empty host name at position 2"), std::string::npos) << error_of("a,,b");
  EXPECT_NE(error_of("").find("empty host name"), std::string::npos);
  EXPECT_NE(error_of("[1-2]").find("cannot start with"), std::string::npos);
  EXPECT_NE(error_of("n[1-99999999]").find("too large"), std::string::npos);
  EXPECT_NE(error_of("a b").find("space"), std::string::npos);
  EXPECT_NE(error_of("x[1-2").find("SLURM_JOB_NODELIST='x[1-2'"), std::string::npos);
}

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(LauncherSlurmJob, NotUnderSrunIsNullopt) {
  EXPECT_FALSE(slurm_job_from_env(env_of({})).has_value());
  EXPECT_FALSE(slurm_job_from_env(env_of({{"SLURM_JOB_ID", "5"}})).has_value());
  // The batch shell of a 2-node job (as seen on the local cluster): no SLURM_STEP_ID.
  EXPECT_FALSE(slurm_job_from_env(env_of({{"SLURM_JOB_ID", "5"},
                                          {"SLURM_NODEID", "0"},
                                          {"SLURM_NNODES", "2"},
                                          {"SLURM_JOB_NODELIST", "node[1-2]"}}))
                   .has_value())
      << "a batch shell is not a step";
}

TEST(LauncherSlurmJob, ReadsTheStepEnvironment) {
  auto job = slurm_job_from_env(env_of({{"SLURM_JOB_ID", "42"},
                                        {"SLURM_STEP_ID", "0"},
                                        {"SLURM_NODEID", "1"},
                                        {"SLURM_NNODES", "2"},
                                        {"SLURM_PROCID", "1"},
                                        {"SLURM_JOB_NODELIST", "node[1-2]"},
                                        {"SLURMD_NODENAME", "node2"}}));
  ASSERT_TRUE(job.has_value());
  EXPECT_EQ(job->job_id, "42");
  EXPECT_EQ(job->node_id, 1);
  EXPECT_EQ(job->num_nodes, 2);
  EXPECT_EQ(job->proc_id, 1);
  EXPECT_EQ(job->nodes, (Hosts{"node1", "node2"}));
  EXPECT_EQ(job->first_host(), "node1");
  EXPECT_FALSE(job->restart_count.has_value()) << "unset before the first requeue";
  EXPECT_EQ(job->node_name, "node2");

  auto requeued = slurm_job_from_env(env_of({{"SLURM_JOB_ID", "42"},
                                             {"SLURM_STEP_ID", "1"},
                                             {"SLURM_NODEID", "0"},
                                             {"SLURM_JOB_NUM_NODES", "2"},
                                             {"SLURM_JOB_NODELIST", "node[1-2]"},
                                             {"SLURM_STEP_NODELIST", "node2"},
                                             {"SLURM_RESTART_COUNT", "2"}}));
  ASSERT_TRUE(requeued.has_value());
  EXPECT_EQ(requeued->restart_count, 2);
  EXPECT_EQ(requeued->nodes, Hosts{"node2"}) << "SLURM_NODEID counts the step's nodes";
}

TEST(LauncherSlurmJob, MalformedValuesNameTheVariable) {
  try {
    slurm_job_from_env(env_of({{"SLURM_JOB_ID", "42"},
                               {"SLURM_STEP_ID", "0"},
                               {"SLURM_NODEID", "x"},
                               {"SLURM_NNODES", "2"},
                               {"SLURM_JOB_NODELIST", "n[1-2]"}}));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_NODEID='x'"), std::string::npos) << e.what();
  }
  try {
    slurm_job_from_env(env_of({{"SLURM_JOB_ID", "42"},
                               {"SLURM_STEP_ID", "0"},
                               {"SLURM_NODEID", "2"},
                               {"SLURM_NNODES", "2"},
                               {"SLURM_JOB_NODELIST", "n[1-2]"}}));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("outside SLURM_JOB_NODELIST"), std::string::npos) << e.what();
  }
}

TEST(LauncherSlurmJob, RendezvousPortComesFromTheJobId) {
  EXPECT_EQ(rdzv_port_for_job("1"), kSlurmRdzvPortBase + 1);
  EXPECT_EQ(rdzv_port_for_job("12345"), kSlurmRdzvPortBase + 2345);
  EXPECT_EQ(rdzv_port_for_job("123_4"), kSlurmRdzvPortBase + 123) << "array job: the leading number";
  EXPECT_LT(rdzv_port_for_job("99999999999"), 65536);
  EXPECT_THROW(rdzv_port_for_job("abc"), ConfigError);
}

}  // namespace
}  // namespace tenax::launcher
