#include "tenax/sdk/callbacks/early_stopping.h"

#include <cmath>
#include <string>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::sdk {

EarlyStoppingCallback::EarlyStoppingCallback(std::int64_t patience, double threshold)
    : patience_(patience), threshold_(threshold) {
  if (patience < 1) {
    throw ConfigError(
        "EarlyStoppingCallback: early_stopping_patience must be >= 1 (evaluations without "
        "improvement before stopping), got " +
        std::to_string(patience));
  }
  if (!std::isfinite(threshold) || threshold < 0) {
    throw ConfigError("EarlyStoppingCallback: early_stopping_threshold must be a finite number >= 0, got " +
                      std::to_string(threshold));
  }
}

void EarlyStoppingCallback::check_arguments(const TrainingArguments& args, const TrainerState& state) {
  arguments_checked_ = true;
  if (args.metric_for_best_model.empty()) {
    throw ConfigError(
        "EarlyStoppingCallback needs metric_for_best_model (the metric it watches, e.g. \"eval_loss\"); it is "
        "empty");
  }
  if (args.eval_strategy == IntervalStrategy::kNo) {
    throw ConfigError(
        "EarlyStoppingCallback needs evaluations: eval_strategy is \"no\"; set it to \"steps\" or \"epoch\" "
        "(and give the Trainer an eval dataset)");
  }
  if (!args.load_best_model_at_end && state.is_world_process_zero()) {
    logger("tenax.callbacks")
        ->warn(
            "EarlyStoppingCallback without load_best_model_at_end: when training stops, the last model is "
            "kept, not the best one");
  }
}

void EarlyStoppingCallback::on_train_begin(const TrainingArguments& args, TrainerState& state, TrainerControl&) {
  check_arguments(args, state);
}

void EarlyStoppingCallback::on_evaluate(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
                                        const Logs& metrics) {
  if (!arguments_checked_) check_arguments(args, state);
  std::string key = args.metric_for_best_model;
  if (key.rfind("eval_", 0) != 0) key = "eval_" + key;
  const auto it = metrics.find(key);
  if (it == metrics.end()) {
    if (state.is_world_process_zero()) {
      logger("tenax.callbacks")
          ->warn(
              "EarlyStoppingCallback: metric_for_best_model '{}' is not among this evaluation's metrics, so "
              "this evaluation does not count for early stopping",
              key);
    }
    return;
  }
  const double value = it->second;
  // transformers: operator(value, best) and abs(value - best) > threshold, with np.greater or
  // np.less; a NaN on either side is no improvement.
  const bool improved =
      !state.best_metric.has_value() ||
      ((args.resolved_greater_is_better() ? value > *state.best_metric : value < *state.best_metric) &&
       std::abs(value - *state.best_metric) > threshold_);
  counter_ = improved ? 0 : counter_ + 1;
  if (counter_ >= patience_) {
    control.should_training_stop = true;
    if (state.is_world_process_zero()) {
      logger("tenax.callbacks")
          ->info("early stopping at step {}: {} did not improve on {} for {} evaluation(s)", state.global_step, key,
                 state.best_metric.value_or(value), counter_);
    }
  }
}

nlohmann::json EarlyStoppingCallback::state() const {
  return {{"args", {{"early_stopping_patience", patience_}, {"early_stopping_threshold", threshold_}}},
          {"attributes", {{"early_stopping_patience_counter", counter_}}}};
}

void EarlyStoppingCallback::restore_state(const nlohmann::json& state) {
  const nlohmann::json counter = state.is_object() && state.contains("attributes") && state["attributes"].is_object()
                                     ? state["attributes"].value("early_stopping_patience_counter", nlohmann::json())
                                     : nlohmann::json();
  if (!counter.is_number_integer() || counter.get<std::int64_t>() < 0) {
    throw StorageError("EarlyStoppingCallback: the saved state has no early_stopping_patience_counter >= 0: " +
                       state.dump());
  }
  counter_ = counter.get<std::int64_t>();
}

}  // namespace tenax::sdk
