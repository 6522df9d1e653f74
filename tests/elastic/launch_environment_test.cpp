// parse_launch_environment: the identity each launcher's variables describe (a pure function).
#include <gtest/gtest.h>

#include <string>

#include "tenax/core/error.h"
#include "tenax/elastic/direct_launch.h"

namespace tenax::elastic {
namespace {

void expect_config_error(const EnvironmentMap& env, const std::string& needle) {
  try {
    parse_launch_environment(env);
    ADD_FAILURE() << "expected a ConfigError mentioning '" << needle << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ElasticLaunchEnvironment, NothingSetIsASingleProcess) {
  const auto id = parse_launch_environment({});
  EXPECT_EQ(id.mode, LaunchMode::kSingleProcess);
  EXPECT_EQ(id.worker.rank, 0);
  EXPECT_EQ(id.worker.world_size, 1);
  EXPECT_EQ(id.launch_id, "");
}

TEST(ElasticLaunchEnvironment, TenaxRunWinsOverEverythingElse) {
  const auto id = parse_launch_environment({{"RANK", "3"},
                                            {"WORLD_SIZE", "4"},
                                            {"LOCAL_RANK", "1"},
                                            {"LOCAL_WORLD_SIZE", "2"},
                                            {"TENAX_GENERATION", "5"},
                                            {"TENAX_RESTART_COUNT", "2"},
                                            {"SLURM_PROCID", "0"},
                                            {"SLURM_NTASKS", "1"},
                                            {"OMPI_COMM_WORLD_RANK", "0"},
                                            {"OMPI_COMM_WORLD_SIZE", "1"},
                                            {"SLURM_RESTART_COUNT", "7"}});
  EXPECT_EQ(id.mode, LaunchMode::kTenaxRun);
  EXPECT_EQ(id.worker.rank, 3);
  EXPECT_EQ(id.worker.world_size, 4);
  EXPECT_EQ(id.worker.local_rank, 1);
  EXPECT_EQ(id.worker.local_world_size, 2);
  EXPECT_EQ(id.worker.generation, 5);
  EXPECT_EQ(id.worker.restart_count, 2) << "the agent's count, not Slurm's";
}

TEST(ElasticLaunchEnvironment, SrunWithTasksPerNodeList) {
  // Node 2 of "2(x2),3": the fifth to seventh tasks; this is task 5, the second on its node.
  const auto id = parse_launch_environment({{"SLURM_PROCID", "5"},
                                            {"SLURM_NTASKS", "7"},
                                            {"SLURM_LOCALID", "1"},
                                            {"SLURM_NODEID", "2"},
                                            {"SLURM_NNODES", "3"},
                                            {"SLURM_STEP_TASKS_PER_NODE", "2(x2),3"},
                                            {"SLURM_JOB_ID", "4242"},
                                            {"SLURM_STEP_ID", "0"},
                                            {"SLURM_RESTART_COUNT", "2"},
                                            {"SLURMD_NODENAME", "node-c"}});
  EXPECT_EQ(id.mode, LaunchMode::kSlurm);
  EXPECT_EQ(id.worker.rank, 5);
  EXPECT_EQ(id.worker.world_size, 7);
  EXPECT_EQ(id.worker.local_rank, 1);
  EXPECT_EQ(id.worker.local_world_size, 3);
  EXPECT_EQ(id.worker.generation, 2) << "each requeue is a new generation";
  EXPECT_EQ(id.worker.restart_count, 2);
  EXPECT_EQ(id.launch_id, "slurm-4242-step-0-restart-2");
  EXPECT_EQ(id.node_name, "node-c");
}

TEST(ElasticLaunchEnvironment, SrunStepCountsWinOverTheAllocations) {
  const auto id = parse_launch_environment({{"SLURM_PROCID", "1"},
                                            {"SLURM_NTASKS", "8"},
                                            {"SLURM_STEP_NUM_TASKS", "2"},
                                            {"SLURM_LOCALID", "1"},
                                            {"SLURM_NODEID", "0"},
                                            {"SLURM_TASKS_PER_NODE", "8"},
                                            {"SLURM_STEP_TASKS_PER_NODE", "2"},
                                            {"SLURM_JOB_ID", "9"}});
  EXPECT_EQ(id.worker.world_size, 2);
  EXPECT_EQ(id.worker.local_world_size, 2);
  EXPECT_EQ(id.launch_id, "slurm-9-step-none-restart-0");
}

TEST(ElasticLaunchEnvironment, SrunWithNtasksPerNodeOnly) {
  const auto id = parse_launch_environment({{"SLURM_PROCID", "3"},
                                            {"SLURM_NTASKS", "4"},
                                            {"SLURM_LOCALID", "1"},
                                            {"SLURM_NNODES", "2"},
                                            {"SLURM_NTASKS_PER_NODE", "2"}});
  EXPECT_EQ(id.worker.local_rank, 1);
  EXPECT_EQ(id.worker.local_world_size, 2);
}

TEST(ElasticLaunchEnvironment, SrunOnOneNodeWithoutPerNodeCountsIsTheWholeWorld) {
  const auto id = parse_launch_environment({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(id.worker.local_rank, 1);
  EXPECT_EQ(id.worker.local_world_size, 2);
}

TEST(ElasticLaunchEnvironment, OpenMpiWinsOverTheBatchStepsSlurmVariables) {
  // mpirun inside an sbatch script: the batch step's SLURM_PROCID=0 is inherited by every rank.
  const auto id = parse_launch_environment({{"OMPI_COMM_WORLD_RANK", "1"},
                                            {"OMPI_COMM_WORLD_SIZE", "2"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                            {"OMPI_MCA_ess_base_jobid", "895418369"},
                                            {"SLURM_PROCID", "0"},
                                            {"SLURM_NTASKS", "1"},
                                            {"SLURM_JOB_ID", "77"},
                                            {"SLURM_STEP_ID", "batch"},
                                            {"SLURM_RESTART_COUNT", "1"}});
  EXPECT_EQ(id.mode, LaunchMode::kOpenMpi);
  EXPECT_EQ(id.worker.rank, 1);
  EXPECT_EQ(id.worker.world_size, 2);
  EXPECT_EQ(id.worker.local_rank, 1);
  EXPECT_EQ(id.worker.local_world_size, 2);
  EXPECT_EQ(id.worker.generation, 1);
  EXPECT_EQ(id.launch_id, "slurm-77-restart-1.ompi-895418369") << "no step id: remote ranks run in another step";
}

TEST(ElasticLaunchEnvironment, MpichHydra) {
  const auto id = parse_launch_environment({{"PMI_RANK", "2"},
                                            {"PMI_SIZE", "4"},
                                            {"MPI_LOCALRANKID", "0"},
                                            {"MPI_LOCALNRANKS", "2"},
                                            {"TENAX_JOB_ID", "run/7"}});
  EXPECT_EQ(id.mode, LaunchMode::kMpich);
  EXPECT_EQ(id.worker.rank, 2);
  EXPECT_EQ(id.worker.world_size, 4);
  EXPECT_EQ(id.worker.local_rank, 0);
  EXPECT_EQ(id.worker.local_world_size, 2);
  EXPECT_EQ(id.launch_id, "job-run_7") << "no '/' in a file name";
}

TEST(ElasticLaunchEnvironment, BadValuesNameTheVariable) {
  expect_config_error({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}}, "SLURM_PROCID=2");
  expect_config_error({{"SLURM_PROCID", "x"}, {"SLURM_NTASKS", "2"}}, "SLURM_PROCID='x' is not an integer");
  expect_config_error({{"SLURM_PROCID", "0"}}, "SLURM_NTASKS is not set");
  expect_config_error({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "0"}}, "OMPI_COMM_WORLD_SIZE=0");
  expect_config_error({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALNRANKS", "3"}}, "MPI_LOCALNRANKS=3");
  expect_config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_NNODES", "2"}}, "--ntasks-per-node");
  expect_config_error(
      {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_NODEID", "0"}, {"SLURM_TASKS_PER_NODE", "2(y2)"}},
      "SLURM_TASKS_PER_NODE='2(y2)'");
  expect_config_error({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_RESTART_COUNT", "-1"}}, "must be >= 0");
}

TEST(ElasticLaunchEnvironment, ModeNames) {
  EXPECT_STREQ(launch_mode_name(LaunchMode::kSlurm), "srun");
  EXPECT_STREQ(launch_mode_name(LaunchMode::kOpenMpi), "mpirun (Open MPI)");
}

}  // namespace
}  // namespace tenax::elastic
