#include "tenax/sdk/training_arguments.h"

#include <gtest/gtest.h>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

std::string error_of(const TrainingArguments& a) {
  try {
    a.validate();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SdkTrainingArguments, ValidArgumentsPassAndBadOnesNameTheField) {
  TrainingArguments a;
  a.output_dir = "/tmp/x";
  EXPECT_EQ(error_of(a), "");
  auto b = a;
  b.output_dir.clear();
  EXPECT_NE(error_of(b).find("output_dir"), std::string::npos);
  b = a;
  b.per_device_train_batch_size = 0;
  EXPECT_NE(error_of(b).find("per_device_train_batch_size"), std::string::npos);
  b = a;
  b.per_device_eval_batch_size = 0;
  EXPECT_NE(error_of(b).find("per_device_eval_batch_size"), std::string::npos);
  b = a;
  b.warmup_ratio = 1.5;
  EXPECT_NE(error_of(b).find("warmup_ratio"), std::string::npos);
  b = a;
  b.lr_scheduler_type = "nope";
  EXPECT_NE(error_of(b).find("lr_scheduler_type"), std::string::npos);
  b = a;
  b.logging_steps = 0;
  EXPECT_NE(error_of(b).find("logging_steps"), std::string::npos);
  b = a;
  b.optim = "adamw_8bit";
  EXPECT_NE(
      error_of(b).find("TrainingArguments.optim: 'adamw_8bit' is not one of: adamw_torch, adamw_torch_fused, sgd, "
                       "adafactor"),
      std::string::npos)
      << error_of(b);
  b = a;
  b.optim = "adafactor";
  b.learning_rate = 0;
  EXPECT_NE(error_of(b).find("learning_rate: must be > 0 with optim = \"adafactor\""), std::string::npos);
}

TEST(SdkTrainingArguments, WarmupStepsOverrideRatio) {
  TrainingArguments a;
  a.warmup_ratio = 0.1;
  EXPECT_EQ(a.resolved_warmup_steps(95), 10);
  a.warmup_steps = 3;
  EXPECT_EQ(a.resolved_warmup_steps(95), 3);
  EXPECT_EQ(a.to_json()["warmup_steps"], 3);
}

// transformers' TrainingArguments.__post_init__: greater_is_better None becomes
// `not metric_for_best_model.endswith("loss")`; a value the user set stays.
TEST(SdkTrainingArguments, GreaterIsBetterIsInferredFromTheMetricAsTransformersDoes) {
  struct Row {
    std::optional<bool> set;
    const char* metric;
    bool resolved;
  };
  const Row rows[] = {
      {std::nullopt, "accuracy", true},
      {std::nullopt, "eval_accuracy", true},
      {std::nullopt, "matthews_correlation", true},
      {std::nullopt, "f1", true},
      {std::nullopt, "loss", false},
      {std::nullopt, "eval_loss", false},
      {std::nullopt, "nll_loss", false},
      {std::nullopt, "lossy", true},
      {false, "accuracy", false},
      {true, "eval_loss", true},
      {false, "eval_loss", false},
  };
  for (const Row& row : rows) {
    TrainingArguments a;
    a.metric_for_best_model = row.metric;
    a.greater_is_better = row.set;
    EXPECT_EQ(a.resolved_greater_is_better(), row.resolved) << row.metric << (row.set ? " (set)" : " (unset)");
    EXPECT_EQ(a.to_json()["greater_is_better"], row.resolved) << "the manifest records the direction used";
  }
  EXPECT_FALSE(TrainingArguments().greater_is_better.has_value()) << "unset by default, as transformers' None";
}

}  // namespace
}  // namespace tenax::sdk
