#include "slurm_requeue.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace tenax::launcher {
namespace {

namespace fs = std::filesystem;

class LauncherSlurmRequeue : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tenax_requeue_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(LauncherSlurmRequeue, RunsTheCommandOncePerJobRun) {
  const auto first = requeue_job("42", 0, dir_, std::chrono::seconds(10), {"/bin/sh", "-c", "echo requeued"});
  EXPECT_EQ(first.outcome, RequeueResult::Outcome::kRequeued) << first.message;
  EXPECT_NE(first.message.find("succeeded"), std::string::npos) << first.message;
  const auto again = requeue_job("42", 0, dir_, std::chrono::seconds(10), {"/bin/sh", "-c", "exit 9"});
  EXPECT_EQ(again.outcome, RequeueResult::Outcome::kAlreadyDone) << again.message;
  // The requeued run (SLURM_RESTART_COUNT=1) may requeue again.
  const auto next = requeue_job("42", 1, dir_, std::chrono::seconds(10), {"/bin/sh", "-c", "true"});
  EXPECT_EQ(next.outcome, RequeueResult::Outcome::kRequeued) << next.message;
}

TEST_F(LauncherSlurmRequeue, AFailedRequeueQuotesTheCommandAndCanBeRetried) {
  const auto failed = requeue_job("7", 0, dir_, std::chrono::seconds(10),
                                  {"/bin/sh", "-c", "echo 'Requested operation is presently disabled' >&2; exit 1"});
  EXPECT_EQ(failed.outcome, RequeueResult::Outcome::kFailed);
  EXPECT_NE(failed.message.find("exited with status 1: Requested operation is presently disabled"), std::string::npos)
      << failed.message;
  EXPECT_NE(failed.message.find("resubmit"), std::string::npos) << failed.message;
  const auto retried = requeue_job("7", 0, dir_, std::chrono::seconds(10), {"/bin/sh", "-c", "true"});
  EXPECT_EQ(retried.outcome, RequeueResult::Outcome::kRequeued) << retried.message;
  const auto missing = requeue_job("8", 0, dir_, std::chrono::seconds(10), {"/nonexistent/scontrol", "requeue", "8"});
  EXPECT_EQ(missing.outcome, RequeueResult::Outcome::kFailed) << missing.message;
}

}  // namespace
}  // namespace tenax::launcher
