// default_callbacks: the progress bar unless disable_tqdm, one logger per report_to entry.
#include "tenax/sdk/callbacks/default_callbacks.h"

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tenax/core/error.h"
#include "tenax/sdk/callbacks/jsonl_metrics.h"
#include "tenax/sdk/callbacks/progress_bar.h"
#include "tenax/sdk/callbacks/tensorboard.h"

namespace tenax::sdk {
namespace {

template <typename T>
int count_of(const std::vector<std::shared_ptr<TrainerCallback>>& callbacks) {
  int n = 0;
  for (const auto& cb : callbacks) n += std::dynamic_pointer_cast<T>(cb) != nullptr;
  return n;
}

TEST(SdkDefaultCallbacks, ProgressBarAndTheReportToLoggers) {
  TrainingArguments args;
  args.output_dir = "out";
  auto callbacks = default_callbacks(args);  // report_to = {"jsonl", "tensorboard"}
  ASSERT_EQ(callbacks.size(), 3u);
  EXPECT_NE(std::dynamic_pointer_cast<ProgressBarCallback>(callbacks[0]), nullptr);
  const auto jsonl = std::dynamic_pointer_cast<JsonlMetricsCallback>(callbacks[1]);
  ASSERT_NE(jsonl, nullptr);
  EXPECT_EQ(jsonl->path(), std::filesystem::path("out/runs/metrics.jsonl"));
  EXPECT_NE(std::dynamic_pointer_cast<TensorBoardCallback>(callbacks[2]), nullptr);

  args.disable_tqdm = true;
  args.report_to = {"tensorboard"};
  callbacks = default_callbacks(args);
  EXPECT_EQ(callbacks.size(), 1u);
  EXPECT_EQ(count_of<TensorBoardCallback>(callbacks), 1);

  args.report_to = {"none"};
  EXPECT_TRUE(default_callbacks(args).empty());
  args.disable_tqdm = false;
  callbacks = default_callbacks(args);
  EXPECT_EQ(callbacks.size(), 1u);
  EXPECT_EQ(count_of<ProgressBarCallback>(callbacks), 1);
}

TEST(SdkDefaultCallbacks, RefusesUnknownDestinationsAndNoneWithOthers) {
  TrainingArguments args;
  args.output_dir = "out";
  for (const auto& report_to : {std::vector<std::string>{"wandb"}, std::vector<std::string>{"none", "jsonl"}}) {
    args.report_to = report_to;
    try {
      default_callbacks(args);
      FAIL() << "expected ConfigError for " << report_to[0];
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("report_to"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace tenax::sdk
