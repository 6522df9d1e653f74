// Direct launch without MPI (issue 11, point 4): ranks started the way srun starts them
// (SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID, ...; no real Slurm needed), that find rank 0's store
// through the files in TENAX_RDZV_DIR and form a Gloo world. Real processes, each with a clean
// environment holding only the variables a test gives it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/elastic/direct_launch.h"
#include "tenax/elastic/in_process_recovery.h"
#include "tenax/elastic/job_keys.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/store.h"

namespace {

namespace fs = std::filesystem;
using Env = std::map<std::string, std::string>;

// A worker process with its output in a file; killed by the destructor if still running.
class Worker {
 public:
  Worker(const Env& env, const fs::path& log) : log_(log) {
    std::vector<std::string> entries;
    for (const auto& [k, v] : env) entries.push_back(k + "=" + v);
    // The sanitizer options travel too: a Tsan build's suppressions (tests/tsan.supp: libzmq's
    // uninstrumented I/O thread) must reach the workers, as they reach every other test's.
    for (const char* keep :
         {"PATH", "HOME", "LD_LIBRARY_PATH", "TMPDIR", "TSAN_OPTIONS", "ASAN_OPTIONS", "UBSAN_OPTIONS"}) {
      if (const char* v = std::getenv(keep); v && env.count(keep) == 0) entries.push_back(std::string(keep) + "=" + v);
    }
    std::vector<char*> envp;
    for (auto& e : entries) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    std::string binary = DIRECT_LAUNCH_WORKER;
    char* argv[] = {binary.data(), nullptr};
    const int rc = posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv, envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) pid_ = -1;
  }
  ~Worker() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  // The exit code; -1 (and the process killed) if it ran past `limit`, a generous bound that
  // only keeps a broken build from hanging ctest.
  int wait(std::chrono::seconds limit = std::chrono::seconds(180)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string output() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  bool started() const { return pid_ > 0; }

 private:
  fs::path log_;
  pid_t pid_ = -1;
};

class ElasticDirectLaunch : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tenax-direct-launch-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // srun's variables for task `rank` of `world` on one node, job 4242.
  Env srun_env(int rank, int world, int restart = 0) const {
    return {{"SLURM_PROCID", std::to_string(rank)},
            {"SLURM_NTASKS", std::to_string(world)},
            {"SLURM_LOCALID", std::to_string(rank)},
            {"SLURM_NODEID", "0"},
            {"SLURM_NNODES", "1"},
            {"SLURM_STEP_TASKS_PER_NODE", std::to_string(world)},
            {"SLURM_JOB_ID", "4242"},
            {"SLURM_STEP_ID", "0"},
            {"SLURM_RESTART_COUNT", std::to_string(restart)},
            {"TENAX_RDZV_DIR", (dir_ / "rdzv").string()},
            {"TENAX_RDZV_TIMEOUT", "60"}};
  }
  fs::path log(const std::string& name) const { return dir_ / (name + ".log"); }

  fs::path dir_;
};

TEST_F(ElasticDirectLaunch, TwoSrunTasksFormAGlooWorldAndAllreduce) {
  Worker r1(srun_env(1, 2), log("r1"));  // rank 1 first: it must wait for rank 0's files
  Worker r0(srun_env(0, 2), log("r0"));
  ASSERT_TRUE(r0.started() && r1.started());
  EXPECT_EQ(r0.wait(), 0) << r0.output();
  EXPECT_EQ(r1.wait(), 0) << r1.output();
  EXPECT_NE(r0.output().find("rank 0 of 2 local 0 of 2 generation 0 restart 0 sum 4.500 ranks 1 store yes"),
            std::string::npos)
      << r0.output();
  EXPECT_NE(r1.output().find("rank 1 of 2 local 1 of 2 generation 0 restart 0 sum 4.500 ranks 1 store yes"),
            std::string::npos)
      << r1.output();
  EXPECT_TRUE(fs::is_empty(dir_ / "rdzv")) << "rank 0 removes the discovery files once every rank has joined";
}

TEST_F(ElasticDirectLaunch, ARankThatNeverComesIsNamedWithWhatToCheck) {
  Env env = srun_env(0, 2);
  env["TENAX_RDZV_TIMEOUT"] = "3";
  Worker r0(env, log("r0"));
  ASSERT_TRUE(r0.started());
  EXPECT_EQ(r0.wait(), 1) << r0.output();
  const std::string out = r0.output();
  EXPECT_NE(out.find("rank 0 of 2 (srun, launch slurm-4242-step-0-restart-0): rank(s) 1 did not join the rendezvous"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("within 3 s"), std::string::npos) << out;
  EXPECT_NE(out.find("started all 2 tasks"), std::string::npos) << out;
  EXPECT_NE(out.find("TENAX_RDZV_DIR=" + (dir_ / "rdzv").string() + " is shared by every node"), std::string::npos)
      << out;
}

TEST_F(ElasticDirectLaunch, WithoutRankZeroTheOthersSayWhereTheyLooked) {
  Env env = srun_env(1, 2);
  env["TENAX_RDZV_TIMEOUT"] = "2";
  Worker r1(env, log("r1"));
  ASSERT_TRUE(r1.started());
  EXPECT_EQ(r1.wait(), 1) << r1.output();
  const std::string out = r1.output();
  EXPECT_NE(out.find("rank 0 did not publish the rendezvous in " +
                     (dir_ / "rdzv" / "slurm-4242-step-0-restart-0.endpoint").string()),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("TENAX_RDZV_ENDPOINT"), std::string::npos) << out;
}

TEST_F(ElasticDirectLaunch, ARequeuedJobNeverReadsTheFilesOfItsEarlierRun) {
  // The first run (SLURM_RESTART_COUNT=0) died and left its files: an endpoint nobody serves,
  // and keys of its own. The requeued job's rank 1 starts before its rank 0 has written anything;
  // had it read the stale files it would have connected to a dead store and failed.
  const fs::path rdzv = dir_ / "rdzv";
  tenax::elastic::write_job_keys_if_absent(rdzv / "slurm-4242-step-0-restart-0.keys",
                                           tenax::elastic::JobKeys::generate());
  tenax::files::atomic_write(rdzv / "slurm-4242-step-0-restart-0.endpoint", "tcp://127.0.0.1:9\n");
  // Alone, the requeued rank 1 waits for its own run's file (deterministic: nothing else runs).
  Env alone = srun_env(1, 2, /*restart=*/1);
  alone["TENAX_RDZV_TIMEOUT"] = "2";
  {
    Worker r1(alone, log("alone"));
    EXPECT_EQ(r1.wait(), 1) << r1.output();
    EXPECT_NE(r1.output().find("rank 0 did not publish the rendezvous in " +
                               (rdzv / "slurm-4242-step-0-restart-1.endpoint").string()),
              std::string::npos)
        << r1.output();
  }
  // With its rank 0, the requeued job forms its world.
  Env e1 = srun_env(1, 2, /*restart=*/1);
  Env e0 = srun_env(0, 2, /*restart=*/1);
  Worker r1(e1, log("r1"));
  Worker r0(e0, log("r0"));
  EXPECT_EQ(r0.wait(), 0) << r0.output();
  EXPECT_EQ(r1.wait(), 0) << r1.output();
  EXPECT_NE(r1.output().find("rank 1 of 2 local 1 of 2 generation 1 restart 1 sum 4.500"), std::string::npos)
      << r1.output();
  EXPECT_TRUE(fs::exists(rdzv / "slurm-4242-step-0-restart-0.endpoint"))
      << "another run's files are not ours to delete";
}

TEST_F(ElasticDirectLaunch, AStoreGivenByTenaxRdzvEndpointIsUsedAndKeptApartPerLaunch) {
  tenax::elastic::KvService service;  // as `tenax rdzv` hosts it (here without CURVE keys)
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  Env e0 = srun_env(0, 2);
  Env e1 = srun_env(1, 2);
  e0["TENAX_RDZV_ENDPOINT"] = e1["TENAX_RDZV_ENDPOINT"] = endpoint;
  Worker r0(e0, log("r0"));
  Worker r1(e1, log("r1"));
  EXPECT_EQ(r0.wait(), 0) << r0.output();
  EXPECT_EQ(r1.wait(), 0) << r1.output();
  EXPECT_NE(r1.output().find("sum 4.500 ranks 1 store yes"), std::string::npos) << r1.output();
  EXPECT_FALSE(fs::exists(dir_ / "rdzv")) << "no discovery files with a given store";
  // The ranks' keys sit under this launch's name, where another launch of generation 0 on the
  // same service cannot see them.
  auto store = tenax::elastic::connect_store(endpoint, std::chrono::seconds(10));
  EXPECT_NO_THROW(store->get("launch/slurm-4242-step-0-restart-0/gen/0/launch/rank/1", std::chrono::seconds(5)));
}

TEST_F(ElasticDirectLaunch, OneTaskNeedsNoStore) {
  Worker r0(srun_env(0, 1), log("r0"));
  EXPECT_EQ(r0.wait(), 0) << r0.output();
  EXPECT_NE(r0.output().find("rank 0 of 1 local 0 of 1 generation 0 restart 0 sum 1.500 ranks 0 store no"),
            std::string::npos)
      << r0.output();
}

// Issue 33, point 3: a replacement (a new process, or a warm spare given a lost rank) that
// cannot join the job -- here no agent ever declares the generation it waits for -- says why in
// one line under its own identity before it exits, so that the agent's log shows what became of
// it. The environment is the one `tenax run` gives a replacement (launcher/src/worker_environment.cpp).
TEST_F(ElasticDirectLaunch, AReplacementThatCannotJoinSaysWhyInOneLineBeforeItExits) {
  tenax::elastic::KvService service;
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  const Env replacement = {{"RANK", "1"},
                           {"WORLD_SIZE", "2"},
                           {"LOCAL_RANK", "0"},
                           {"LOCAL_WORLD_SIZE", "1"},
                           {"TENAX_GENERATION", "3"},
                           {"TENAX_RDZV_ENDPOINT", endpoint},
                           {"TENAX_RDZV_TIMEOUT", "1"},
                           {tenax::elastic::kRecoveryVariable, tenax::elastic::kRecoveryInProcess},
                           {tenax::elastic::kNodeIdVariable, "node-000001"}};
  Env new_process = replacement;
  new_process[tenax::elastic::kReplacementVariable] = "1";
  Env spare = replacement;
  spare[tenax::elastic::kSpareIdVariable] = "7";
  // The agent gives the spare its rank and generation, then (here) declares nothing.
  auto store = tenax::elastic::connect_store(endpoint, std::chrono::seconds(10));
  const std::string assignment = "0 3 2";
  store->set(tenax::elastic::spare_key("node-000001", 7), std::vector<char>(assignment.begin(), assignment.end()));
  const std::vector<std::pair<std::string, Env>> cases = {{"a new process", new_process}, {"warm spare 7", spare}};
  for (const auto& [who, env] : cases) {
    SCOPED_TRACE(who);
    Worker w(env, log(who == "a new process" ? "new" : "spare"));
    ASSERT_TRUE(w.started());
    EXPECT_EQ(w.wait(std::chrono::seconds(60)), 1) << w.output();
    const std::string out = w.output();
    const std::string line =
        who + " of node node-000001 (replacing a lost rank from generation 3) cannot join the job:";
    const auto at = out.find(line);
    ASSERT_NE(at, std::string::npos) << out;
    EXPECT_EQ(out.find(line, at + 1), std::string::npos) << "one line\n" << out;
    const std::size_t begin = out.rfind('\n', at) == std::string::npos ? 0 : out.rfind('\n', at) + 1;
    const std::string said = out.substr(begin, out.find('\n', at) - begin);
    EXPECT_NE(said.find("the agent declared no generation 3 within 1000 ms"), std::string::npos) << said;
    EXPECT_NE(said.find("[tenax.elastic] error:"), std::string::npos) << "an error line: " << said;
  }
}

// In this process, which never initialised MPI: asking for an MPI communicator is a clear
// configuration error, whether this Tenax has MPI (not initialised) or not (built without it).
TEST(ElasticDirectLaunchMpi, AnMpiCommunicatorWithoutMpiIsAConfigError) {
  try {
    tenax::elastic::WorkerContext::from_launch(tenax::elastic::LaunchOptions().mpi_fortran_comm(0));
    ADD_FAILURE() << "from_launch must refuse an MPI communicator here";
  } catch (const tenax::ConfigError& e) {
    const std::string needle = tenax::elastic::built_with_mpi() ? "MPI is not initialised" : "TENAX_WITH_MPI=OFF";
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

}  // namespace
