// EarlyStoppingCallback against transformers' semantics: the evaluation at which training
// stops, for both directions of the metric and with a threshold; the refusals.
#include "tenax/sdk/callbacks/early_stopping.h"

#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

TrainingArguments args_for(const std::string& metric, bool greater_is_better) {
  TrainingArguments args;
  args.output_dir = "unused";
  args.eval_strategy = "steps";
  args.metric_for_best_model = metric;
  args.greater_is_better = greater_is_better;
  args.load_best_model_at_end = true;
  return args;
}

// Runs evaluations with `values` of `key` as transformers' Trainer does: on_evaluate, then the
// Trainer's best_metric update (_determine_best_metric: strictly better, no threshold). Returns
// the 1-based evaluation after which the callback asked to stop, or 0 if it never did.
int stopping_evaluation(EarlyStoppingCallback& cb, const TrainingArguments& args, const std::string& key,
                        const std::vector<double>& values) {
  TrainerState state;
  TrainerControl control;
  cb.on_train_begin(args, state, control);
  for (std::size_t i = 0; i < values.size(); ++i) {
    state.global_step = static_cast<std::int64_t>(10 * (i + 1));
    cb.on_evaluate(args, state, control, Logs{{key, values[i]}, {"eval_runtime", 0.1}});
    const double v = values[i];
    if (!state.best_metric || (args.resolved_greater_is_better() ? v > *state.best_metric : v < *state.best_metric)) {
      state.best_metric = v;
    }
    if (control.should_training_stop) return static_cast<int>(i + 1);
  }
  return 0;
}

TEST(SdkEarlyStopping, LowerIsBetterStopsAfterPatienceEvaluationsWithoutImprovement) {
  const auto args = args_for("loss", /*greater_is_better=*/false);  // "eval_" is prefixed
  EarlyStoppingCallback cb(2);
  // 1.0 first (no best yet), 0.8 improves, 0.85 and 0.9 do not: stop at the 4th.
  EXPECT_EQ(stopping_evaluation(cb, args, "eval_loss", {1.0, 0.8, 0.85, 0.9, 0.7}), 4);
  EXPECT_EQ(cb.patience_counter(), 2);
}

TEST(SdkEarlyStopping, GreaterIsBetterCountsOnlyEvaluationsInARowWithoutImprovement) {
  const auto args = args_for("eval_accuracy", /*greater_is_better=*/true);
  EarlyStoppingCallback cb(2);
  // 0.55 is one miss, 0.7 resets the count, 0.65 and 0.6 are two misses in a row.
  EXPECT_EQ(stopping_evaluation(cb, args, "eval_accuracy", {0.5, 0.6, 0.55, 0.7, 0.65, 0.6}), 6);

  // The same values with lower-is-better: 0.5 stays the best, so 0.6 and 0.55 are two misses.
  EarlyStoppingCallback lower(2);
  EXPECT_EQ(
      stopping_evaluation(lower, args_for("eval_accuracy", false), "eval_accuracy", {0.5, 0.6, 0.55, 0.7, 0.65, 0.6}),
      3);
}

TEST(SdkEarlyStopping, ImprovementsNoLargerThanTheThresholdDoNotCount) {
  const auto args = args_for("eval_loss", false);
  // Gains of 0.03 and 0.01 are below 0.05: two misses. The Trainer still takes 0.97 as the new
  // best, so 0.96 is compared with 0.97, not with 1.0.
  EarlyStoppingCallback with_threshold(2, 0.05);
  EXPECT_EQ(stopping_evaluation(with_threshold, args, "eval_loss", {1.0, 0.97, 0.96, 0.90}), 3);
  // Without the threshold every one of them is an improvement.
  EarlyStoppingCallback without(2, 0.0);
  EXPECT_EQ(stopping_evaluation(without, args, "eval_loss", {1.0, 0.97, 0.96, 0.90}), 0);
  // A gain of exactly the threshold is not larger than it.
  EarlyStoppingCallback exact(1, 0.5);
  EXPECT_EQ(stopping_evaluation(exact, args, "eval_loss", {2.0, 1.5}), 2);
}

TEST(SdkEarlyStopping, ComparesWithTheBestBeforeThisEvaluation) {
  // The first evaluation always improves (no best yet), even when it is bad.
  const auto args = args_for("eval_loss", false);
  EarlyStoppingCallback cb(1);
  TrainerState state;
  TrainerControl control;
  cb.on_evaluate(args, state, control, Logs{{"eval_loss", 100.0}});
  EXPECT_FALSE(control.should_training_stop);
  // A best already recorded (by the Trainer, or restored from a checkpoint) counts.
  state.best_metric = 0.5;
  cb.on_evaluate(args, state, control, Logs{{"eval_loss", 0.6}});
  EXPECT_TRUE(control.should_training_stop);
}

TEST(SdkEarlyStopping, MissingMetricIsSkippedNotAnError) {
  const auto args = args_for("eval_f1", true);
  EarlyStoppingCallback cb(1);
  TrainerState state;
  state.best_metric = 0.9;
  TrainerControl control;
  EXPECT_NO_THROW(cb.on_evaluate(args, state, control, Logs{{"eval_loss", 0.3}}));
  EXPECT_FALSE(control.should_training_stop);
  EXPECT_EQ(cb.patience_counter(), 0);
}

std::string config_error_of(const TrainingArguments& args) {
  EarlyStoppingCallback cb(3);
  TrainerState state;
  TrainerControl control;
  try {
    cb.on_train_begin(args, state, control);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SdkEarlyStopping, RefusesArgumentsWithoutMetricOrEvaluations) {
  auto args = args_for("", false);
  EXPECT_NE(config_error_of(args).find("metric_for_best_model"), std::string::npos);
  args = args_for("eval_loss", false);
  args.eval_strategy = "no";
  EXPECT_NE(config_error_of(args).find("eval_strategy"), std::string::npos);
  EXPECT_EQ(config_error_of(args_for("eval_loss", false)), "");

  // A hand-written loop that calls on_evaluate first is checked there.
  EarlyStoppingCallback cb(1);
  TrainerState state;
  TrainerControl control;
  EXPECT_THROW(cb.on_evaluate(args_for("", false), state, control, Logs{{"eval_loss", 1.0}}), ConfigError);
}

TEST(SdkEarlyStopping, RefusesPatienceBelowOneAndNegativeThreshold) {
  EXPECT_THROW(EarlyStoppingCallback(0), ConfigError);
  EXPECT_THROW(EarlyStoppingCallback(1, -0.1), ConfigError);
  try {
    EarlyStoppingCallback(0);
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("early_stopping_patience"), std::string::npos);
  }
}

}  // namespace
}  // namespace tenax::sdk
