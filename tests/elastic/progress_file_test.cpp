// ProgressFile: what `tenax run --hang-timeout` watches. It writes the step, rate-limits its
// writes, and is a no-op without a path.
#include "tenax/elastic/progress_file.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace tenax::elastic {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  return s;
}

TEST(ElasticProgressFile, WritesTheLatestStepAtMostOncePerInterval) {
  const auto path = std::filesystem::path(::testing::TempDir()) / ("tenax-progress-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ProgressFile progress(path, std::chrono::milliseconds(200));
  ASSERT_TRUE(progress.enabled());
  progress.report(7);
  EXPECT_EQ(read(path), "7") << "the first report always writes";
  progress.report(8);
  EXPECT_EQ(read(path), "7") << "a report within the interval is skipped";
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  progress.report(9);
  EXPECT_EQ(read(path), "9");
  std::filesystem::remove(path);
}

TEST(ElasticProgressFile, FinishRemovesTheFileAndTheNextReportWritesAtOnce) {
  const auto path = std::filesystem::path(::testing::TempDir()) / ("tenax-progress-fin-" + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ProgressFile progress(path, std::chrono::hours(1));  // no report would pass the rate limit again
  progress.report(30);
  ASSERT_TRUE(std::filesystem::exists(path));
  progress.finish();
  EXPECT_FALSE(std::filesystem::exists(path)) << "a finished phase leaves nothing for the agent to judge";
  progress.finish();  // idempotent
  progress.report(31);
  EXPECT_EQ(read(path), "31") << "a new phase reports at once, despite the rate limit";
  std::filesystem::remove(path);
}

TEST(ElasticProgressFile, WithoutThePathItDoesNothing) {
  ::unsetenv(kProgressFileVariable);
  ProgressFile progress = ProgressFile::from_env();
  EXPECT_FALSE(progress.enabled());
  progress.report(1);  // no file, no throw
}

TEST(ElasticProgressFile, AnUnwritablePathIsNotFatal) {
  ProgressFile progress("/nonexistent-dir/tenax/progress");
  EXPECT_NO_THROW(progress.report(1));
  EXPECT_NO_THROW(progress.report(2));
}

}  // namespace
}  // namespace tenax::elastic
