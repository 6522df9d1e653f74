// JsonlMetricsCallback: one JSON object per entry, evaluations once, appending on reopen, and
// the error for a directory that cannot be created.
#include "tenax/sdk/callbacks/jsonl_metrics.h"

#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sdk/callbacks/callback_test_support.h"
#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

using testing::read_file;
using testing::state_at;

class SdkJsonlMetrics : public testing::CallbackDirTest {
 protected:
  std::vector<std::string> lines() {
    std::istringstream in(read_file(dir_ / "runs" / "metrics.jsonl"));
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }
  // A training log at `step` and an evaluation through both hooks, as Trainer::evaluate does.
  static void log_and_evaluate(JsonlMetricsCallback& cb, std::int64_t step) {
    TrainingArguments args;
    TrainerControl control;
    TrainerState state = state_at(step);
    cb.on_log(args, state, control,
              Logs{{"loss", 0.5}, {"learning_rate", 1e-4}, {"epoch", state.epoch}, {"step", double(step)}});
    const Logs metrics{{"eval_loss", 0.25}, {"eval_accuracy", 0.75}};
    Logs logged = metrics;
    logged["epoch"] = state.epoch;
    logged["step"] = static_cast<double>(step);
    cb.on_log(args, state, control, logged);
    cb.on_evaluate(args, state, control, metrics);
  }
};

TEST_F(SdkJsonlMetrics, OneObjectPerEntryWithStepAndEpochFirst) {
  JsonlMetricsCallback cb(dir_ / "runs");
  TrainingArguments args;
  TrainerControl control;
  TrainerState begin = state_at(0);
  cb.on_train_begin(args, begin, control);
  ASSERT_TRUE(std::filesystem::exists(dir_ / "runs" / "metrics.jsonl"));  // created with the directory
  log_and_evaluate(cb, 2);

  // An evaluation reported through on_evaluate alone (a hand-written loop) is written too.
  TrainerState state = state_at(3);
  cb.on_evaluate(args, state, control, Logs{{"eval_loss", 0.125}});

  const auto l = lines();
  ASSERT_EQ(l.size(), 3u);
  EXPECT_EQ(l[0], R"({"step":2,"epoch":0.2,"learning_rate":0.0001,"loss":0.5})");
  EXPECT_EQ(l[1], R"({"step":2,"epoch":0.2,"eval_accuracy":0.75,"eval_loss":0.25})");
  EXPECT_EQ(l[2], R"({"step":3,"epoch":0.3,"eval_loss":0.125})");
  for (const auto& line : l) EXPECT_TRUE(nlohmann::json::parse(line).is_object());
}

TEST_F(SdkJsonlMetrics, ReopeningAppendsAndNeverTruncates) {
  {
    JsonlMetricsCallback first(dir_ / "runs");
    log_and_evaluate(first, 2);
  }
  ASSERT_EQ(lines().size(), 2u);
  // A crash cut the next line short; the resumed run's first line still starts on its own.
  std::ofstream(dir_ / "runs" / "metrics.jsonl", std::ios::app) << R"({"step":3,"lo)";
  {
    JsonlMetricsCallback resumed(dir_ / "runs");
    TrainingArguments args;
    TrainerControl control;
    TrainerState state = state_at(4);
    resumed.on_train_begin(args, state, control);
    log_and_evaluate(resumed, 4);
  }
  const auto l = lines();
  ASSERT_EQ(l.size(), 5u);
  EXPECT_EQ(l[0], R"({"step":2,"epoch":0.2,"learning_rate":0.0001,"loss":0.5})");
  EXPECT_EQ(l[2], R"({"step":3,"lo)");
  EXPECT_EQ(nlohmann::json::parse(l[3])["step"], 4);
  EXPECT_EQ(nlohmann::json::parse(l[4])["eval_loss"], 0.25);
}

TEST_F(SdkJsonlMetrics, NonFiniteValuesAreNull) {
  JsonlMetricsCallback cb(dir_ / "runs");
  TrainingArguments args;
  TrainerControl control;
  TrainerState state = state_at(1);
  cb.on_log(args, state, control, Logs{{"loss", std::numeric_limits<double>::quiet_NaN()}});
  const auto l = lines();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0], R"({"step":1,"epoch":0.1,"loss":null})");
}

TEST_F(SdkJsonlMetrics, UnwritableDirectoryIsAnErrorNamingThePath) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "a-file") << "not a directory";
  const auto logging_dir = dir_ / "a-file" / "runs";
  JsonlMetricsCallback cb(logging_dir);
  TrainingArguments args;
  TrainerControl control;
  TrainerState state = state_at(0);
  try {
    cb.on_train_begin(args, state, control);
    FAIL() << "expected StorageError";
  } catch (const StorageError& e) {
    EXPECT_NE(std::string(e.what()).find(logging_dir.string()), std::string::npos) << e.what();
  }
}

TEST_F(SdkJsonlMetrics, OtherRanksWriteNothing) {
  JsonlMetricsCallback cb(dir_ / "runs");
  TrainingArguments args;
  TrainerControl control;
  TrainerState state = state_at(2, 10, /*rank=*/1);
  cb.on_train_begin(args, state, control);
  cb.on_log(args, state, control, Logs{{"loss", 0.5}});
  cb.on_evaluate(args, state, control, Logs{{"eval_loss", 0.5}});
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs"));
}

}  // namespace
}  // namespace tenax::sdk
