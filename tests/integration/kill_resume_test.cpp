// The foundation slice end to end, with real processes: `tenax run` starts 2 workers of the
// example over Gloo; one SIGKILLs itself; the agent restarts the generation; the workers
// resume from the newest committed checkpoint; the final parameters equal, bit for bit,
// those of an uninterrupted run.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <regex>

#include "tenax/core/blas_kernels.h"

#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"
#include "support/model_checkpoints.h"

namespace fs = std::filesystem;

namespace {

constexpr int kMaxSteps = 60;

fs::path base_dir() {
  static const fs::path dir = [] {
    auto d = fs::path(::testing::TempDir()) / ("tenax-integration-" + std::to_string(::getpid()));
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

// `fresh`: start from an empty directory; otherwise keep its checkpoints (a resubmitted job).
RunResult run_job(const std::string& name, const std::string& extra_args, bool fresh = true,
                  const std::string& agent_args = "") {
  const fs::path out = base_dir() / name;
  if (fresh) fs::remove_all(out);
  fs::create_directories(out);
  const fs::path log = out / "job.log";
  const std::string cmd = std::string(TENAX_BINARY) + " run --nproc-per-node 2 --max-restarts 3 " + agent_args +
                          " --run-dir " + (out / "run").string() + " -- " + EXAMPLE_BINARY + " --output-dir " +
                          (out / "train").string() + " --max-steps " + std::to_string(kMaxSteps) +
                          " --save-steps 20 --logging-steps 10 " + extra_args + " > " + log.string() + " 2>&1";
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

// (d): whatever a crash left behind, nothing without a manifest may count as a checkpoint,
// and everything that counts must verify.
void expect_only_valid_checkpoints(const std::string& name) {
  tenax::storage::CheckpointDirectory dir(base_dir() / name / "train" / "checkpoints");
  for (auto step : dir.committed_steps()) {
    auto reader = tenax::storage::CheckpointReader::open(dir.step_dir(step));
    ASSERT_TRUE(reader.is_ok()) << reader.status().to_string();
    EXPECT_TRUE(reader.value().verify_all().is_ok()) << "step " << step;
  }
  for (const auto& p : dir.uncommitted_dirs()) {
    EXPECT_FALSE(fs::exists(p / tenax::storage::kManifestFile)) << p;
  }
}

class IntegrationKillResume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { reference_ = new RunResult(run_job("reference", "")); }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  static RunResult* reference_;

 public:
  static RunResult* reference() { return reference_; }
};
RunResult* IntegrationKillResume::reference_ = nullptr;
RunResult* IntegrationKillResumeReference() { return IntegrationKillResume::reference(); }

TEST_F(IntegrationKillResume, UninterruptedRunFinishesWithoutRestart) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  EXPECT_EQ(reference_->agent["restarts"], 0) << reference_->agent.dump();
  EXPECT_TRUE(fs::exists(final_checkpoint("reference") / "manifest.json"));
}

// Whatever OpenBLAS makes of this CPU on its own (Debian 12's 0.3.21 falls back to SSE3 on a
// 2023 Xeon), the workers of `tenax run` train with vector kernels when the CPU has them, and
// say which in their log.
TEST_F(IntegrationKillResume, WorkersTrainWithTheCpusVectorKernels) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  std::smatch agent, worker;
  ASSERT_TRUE(
      std::regex_search(reference_->log, agent, std::regex(R"(\[agent g0\] \[tenax\.launcher\] \w+: BLAS: .*)")))
      << reference_->log;
  ASSERT_TRUE(
      std::regex_search(reference_->log, worker,
                        std::regex(R"(\[worker r0 g0\] \[tenax\.trainer\] \w+: BLAS: OpenBLAS [^,]+, core (\w+))")))
      << reference_->log;
  // No better kernels for this CPU than the worker's (on a CPU without AVX2 there are none).
  const tenax::CpuVectorFeatures cpu = tenax::detect_cpu_vector_features();
  EXPECT_EQ(tenax::better_openblas_core(worker.str(1), cpu), std::nullopt)
      << worker.str(0) << "\nagent: " << agent.str(0);
  if (cpu.avx2_fma) {
    EXPECT_TRUE(tenax::is_vector_openblas_core(worker.str(1))) << worker.str(0);
  }
}

TEST_F(IntegrationKillResume, KillBetweenCheckpointsResumesBitIdentically) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  RunResult r = run_job("kill-mid", "--fail-at-step 30 --fail-rank 1");
  ASSERT_EQ(r.exit_code, 0) << r.log;                   // (a) finishes
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();  // (c) exactly once
  EXPECT_NE(r.log.find("SIGKILL"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("at step 20"), std::string::npos) << "resumed from the step-20 checkpoint\n" << r.log;
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint("kill-mid"));  // (b)
  expect_only_valid_checkpoints("kill-mid");                                                                 // (d)
}

TEST_F(IntegrationKillResume, KillBeforeFirstCheckpointRestartsFromScratch) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  RunResult r = run_job("kill-early", "--fail-at-step 7 --fail-rank 0");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();
  EXPECT_NE(r.log.find("starting from scratch"), std::string::npos) << r.log;
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint("kill-early"));
  expect_only_valid_checkpoints("kill-early");
}

// A worker that stops making progress (SIGSTOP: as a deadlock or a stuck filesystem would look)
// is found by the agent through the progress file the Trainer rewrites every step, the
// generation is restarted, and the job still ends bit-identical.
TEST_F(IntegrationKillResume, HungWorkerIsDetectedRestartedAndResumesBitIdentically) {
  ASSERT_EQ(reference_->exit_code, 0) << reference_->log;
  RunResult r = run_job("hang", "--fail-at-step 30 --fail-rank 1 --fail-signal STOP", true, "--hang-timeout 2");
  ASSERT_EQ(r.exit_code, 0) << r.log;
  EXPECT_EQ(r.agent["restarts"], 1) << r.agent.dump();
  EXPECT_NE(r.log.find("SIGSTOP"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("made no progress"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("at step 20"), std::string::npos) << "resumed from the step-20 checkpoint\n" << r.log;
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint("hang"));
  expect_only_valid_checkpoints("hang");
}

TEST_F(IntegrationKillResume, BadWorkerArgumentIsAConfigErrorNotARestartLoop) {
  RunResult r = run_job("bad-flag", "--fail-rank 5 --fail-at-step 3");
  // Exit 2 from the workers means configuration: restarting cannot fix it, so the agent
  // stops at once with 2 instead of burning its restart budget.
  EXPECT_EQ(r.exit_code, 2) << r.log;
  EXPECT_EQ(r.agent["restarts"], 0) << r.agent.dump();
  EXPECT_NE(r.log.find("--fail-rank 5"), std::string::npos) << r.log;
}

// Preemption, end to end with real signals: rank 0 sends the signal to the agent after step 25
// (as Slurm or scancel would), the agent forwards it, every rank stops at the same step, saves
// and exits 3, the agent exits 3; the resubmitted job resumes there and ends bit-identical.
void expect_preempt_and_resume(const std::string& name, const std::string& signal) {
  ASSERT_EQ(IntegrationKillResumeReference()->exit_code, 0);
  RunResult first = run_job(name, "--preempt-at-step 25 --preempt-signal " + signal);
  ASSERT_EQ(first.exit_code, 3) << first.log;
  EXPECT_EQ(first.agent["outcome"], "preempted") << first.agent.dump();
  EXPECT_EQ(first.agent["restarts"], 0) << "a preemption is not a failure to restart from";
  EXPECT_NE(first.log.find("forwarding SIG" + signal), std::string::npos) << first.log;
  tenax::storage::CheckpointDirectory dir(base_dir() / name / "train" / "checkpoints");
  const auto saved = dir.latest_step();
  ASSERT_TRUE(saved.has_value());
  EXPECT_GE(*saved, 25);
  EXPECT_LT(*saved, kMaxSteps);
  EXPECT_NE(first.log.find("preempted by SIG" + signal + " at step " + std::to_string(*saved)), std::string::npos)
      << first.log;
  expect_only_valid_checkpoints(name);

  RunResult second = run_job(name, "", /*fresh=*/false);
  ASSERT_EQ(second.exit_code, 0) << second.log;
  EXPECT_NE(second.log.find("at step " + std::to_string(*saved)), std::string::npos) << second.log;
  tenax::testing::expect_bit_identical_models(final_checkpoint("reference"), final_checkpoint(name));
}

TEST_F(IntegrationKillResume, PreemptedBySigusr1SavesExitsThreeAndResumesBitIdentically) {
  expect_preempt_and_resume("preempt-usr1", "USR1");
}

TEST_F(IntegrationKillResume, PreemptedBySigtermSavesExitsThreeAndResumesBitIdentically) {
  expect_preempt_and_resume("preempt-term", "TERM");
}

}  // namespace
