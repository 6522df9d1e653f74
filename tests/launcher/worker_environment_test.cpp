#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "agent.h"
#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

std::map<std::string, std::string> as_map(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& e : env) {
    const auto eq = e.find('=');
    EXPECT_TRUE(out.emplace(e.substr(0, eq), e.substr(eq + 1)).second) << "duplicate " << e;
  }
  return out;
}

TEST(LauncherWorkerEnvironment, SetsTorchrunAndTenaxVariables) {
  WorkerEnvironment v;
  v.rank = 1;
  v.world_size = 4;
  v.generation = 2;
  v.restart_count = 2;
  v.max_restarts = 3;
  v.rdzv_endpoint = "tcp://127.0.0.1:45123";
  v.master_port = 29517;
  v.run_id = "job-42";
  v.run_dir = "/runs/a";
  v.keys_file = "/runs/tenax-job.keys";
  v.fence_dir = "/runs";
  auto env = as_map(worker_environment({"PATH=/bin", "RANK=99", "TENAX_GENERATION=7"}, v));
  EXPECT_EQ(env["PATH"], "/bin");
  EXPECT_EQ(env["RANK"], "1");
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["GROUP_RANK"], "0");
  EXPECT_EQ(env["GROUP_WORLD_SIZE"], "1");
  EXPECT_EQ(env["ROLE_RANK"], "1");
  EXPECT_EQ(env["ROLE_WORLD_SIZE"], "4");
  EXPECT_EQ(env["ROLE_NAME"], "default");
  EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
  // Not Tenax's rendezvous port: PyTorch's init_process_group binds MASTER_PORT on rank 0.
  EXPECT_EQ(env["MASTER_PORT"], "29517");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job-42");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "False");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env["TENAX_GENERATION"], "2");
  EXPECT_EQ(env["TENAX_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TENAX_RDZV_ENDPOINT"], "tcp://127.0.0.1:45123");
  EXPECT_EQ(env["TENAX_RUN_DIR"], "/runs/a");
  EXPECT_EQ(env["TENAX_KEYS_FILE"], "/runs/tenax-job.keys");
  EXPECT_EQ(env["TENAX_FENCE_DIR"], "/runs");
  for (const std::string& name : worker_env_names()) EXPECT_EQ(env.count(name), 1u) << name;
}

TEST(LauncherWorkerEnvironment, KeepsTheUsersNcclErrorHandlingAndRefusesANonPort) {
  WorkerEnvironment v;
  v.rdzv_endpoint = "tcp://127.0.0.1:45123";
  v.master_port = 40000;
  auto env = as_map(worker_environment({"TORCH_NCCL_ASYNC_ERROR_HANDLING=3", "MASTER_PORT=1"}, v));
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");  // torchrun keeps the user's value too
  EXPECT_EQ(env["MASTER_PORT"], "40000");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "none");
  for (int bad : {0, -1, 65536}) {
    v.master_port = bad;
    EXPECT_THROW(worker_environment({}, v), Error) << bad;
  }
}

TEST(LauncherWorkerEnvironment, EndpointPort) {
  EXPECT_EQ(endpoint_port("tcp://127.0.0.1:5555"), 5555);
  EXPECT_THROW(endpoint_port("tcp://127.0.0.1"), Error);
  EXPECT_THROW(endpoint_port("tcp://127.0.0.1:"), Error);
  EXPECT_THROW(endpoint_port("tcp://127.0.0.1:0"), Error);
  EXPECT_THROW(endpoint_port("tcp://127.0.0.1:99999"), Error);
}

}  // namespace
}  // namespace tenax::launcher
