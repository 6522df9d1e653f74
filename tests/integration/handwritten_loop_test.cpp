// The hand-written loop example (examples/handwritten_loop: GradSync, LrSchedule, Checkpointer,
// no Trainer) under `tenax run` with 2 ranks: killed and restarted by the agent, or failed and
// run again by hand, it resumes from its newest checkpoint at the saved step, finishes, and ends
// with the parameters of an uninterrupted run, bit for bit.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"
#include "support/model_checkpoints.h"

namespace fs = std::filesystem;

namespace {

constexpr int kMaxSteps = 40;

fs::path base_dir() {
  static const fs::path dir = [] {
    auto d = fs::path(::testing::TempDir()) / ("tenax-handwritten-" + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

struct RunResult {
  int exit_code = -1;
  std::string log;
  nlohmann::json agent;
};

// `fresh`: start from an empty directory; otherwise keep its checkpoints (the job run again).
RunResult run_job(const std::string& name, const std::string& extra_args, int max_restarts, bool fresh = true) {
  const fs::path out = base_dir() / name;
  if (fresh) fs::remove_all(out);
  fs::create_directories(out);
  const fs::path log = out / "job.log";
  const std::string cmd = std::string(TENAX_BINARY) + " run --nproc-per-node 2 --max-restarts " +
                          std::to_string(max_restarts) + " --run-dir " + (out / "run").string() + " -- " +
                          HANDWRITTEN_BINARY + " --output-dir " + (out / "train").string() + " --max-steps " +
                          std::to_string(kMaxSteps) + " --save-steps 10 " + extra_args + " > " + log.string() + " 2>&1";
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  r.log = ss.str();
  std::ifstream agent(out / "run" / "agent.json");
  if (agent) r.agent = nlohmann::json::parse(agent, nullptr, false);
  return r;
}

fs::path final_checkpoint(const std::string& name) {
  return base_dir() / name / "train" / "checkpoints" / tenax::storage::step_dir_name(kMaxSteps);
}

class IntegrationHandwrittenLoop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference_ = new RunResult(run_job("reference", "", /*max_restarts=*/0)); }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  static RunResult* reference_;
};
RunResult* IntegrationHandwrittenLoop::reference_ = nullptr;

TEST_F(IntegrationHandwrittenLoop, UninterruptedRunFinishes) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  EXPECT_EQ(reference_->agent["restarts"], 0) << reference_->agent.dump();
  EXPECT_NE(reference_->log.find("starting from scratch"), std::string::npos) << reference_->log;
  EXPECT_NE(reference_->log.find("training finished at step 40"), std::string::npos) << reference_->log;
  EXPECT_TRUE(fs::exists(final_checkpoint("reference") / tenax::storage::kManifestFile));
}

TEST_F(IntegrationHandwrittenLoop, KilledRankIsRestartedByTheAgentAndResumesAtTheSavedStep) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  RunResult r = run_job("kill", "--fail-at-step 25 --fail-rank 1", /*max_restarts=*/2);
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();
  EXPECT_NE(r.log.find("SIGKILL after step 25"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("at step 20"), std::string::npos) << "resumed from the step-20 checkpoint\n" << r.log;
  EXPECT_NE(r.log.find("training finished at step 40"), std::string::npos) << r.log;
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint("kill"));
}

TEST_F(IntegrationHandwrittenLoop, FailedJobRunAgainResumesAtTheSavedStepThenRerunIsANoOp) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  RunResult failed = run_job("rerun", "--fail-at-step 13 --fail-rank 0", /*max_restarts=*/0);
  EXPECT_NE(failed.exit_code, 0) << failed.log;
  tenax::storage::CheckpointDirectory dir(base_dir() / "rerun" / "train" / "checkpoints");
  ASSERT_EQ(dir.latest_step(), std::optional<std::int64_t>(10)) << failed.log;

  RunResult again = run_job("rerun", "", /*max_restarts=*/0, /*fresh=*/false);
  ASSERT_EQ(again.exit_code, 0) << again.log;
  EXPECT_NE(again.log.find("at step 10"), std::string::npos) << again.log;
  EXPECT_EQ(again.log.find("starting from scratch"), std::string::npos) << again.log;
  EXPECT_NE(again.log.find("training finished at step 40"), std::string::npos) << again.log;
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint("rerun"));

  // A finished job run once more finds its last checkpoint and has nothing left to do.
  RunResult done = run_job("rerun", "", /*max_restarts=*/0, /*fresh=*/false);
  ASSERT_EQ(done.exit_code, 0) << done.log;
  EXPECT_NE(done.log.find("at step 40"), std::string::npos) << done.log;
  EXPECT_EQ(done.log.find("saved checkpoint"), std::string::npos) << "nothing to save\n" << done.log;
}

}  // namespace
