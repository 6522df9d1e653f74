// EarlyStoppingCallback: stops training when args.metric_for_best_model stops improving, with
// the semantics of transformers.EarlyStoppingCallback.
//
// At each on_evaluate it reads metrics[metric_for_best_model] ("eval_" is prefixed when the
// name lacks it). The evaluation improves when state.best_metric is unset, or when the value is
// better than state.best_metric (greater when greater_is_better, else smaller) by more than
// `threshold`; an improvement resets the counter, anything else adds one. When the counter
// reaches `patience`, control.should_training_stop is set. A missing metric logs a warning and
// changes nothing.
//
// The comparison is with state.best_metric as it was before this evaluation: the Trainer
// updates best_metric after on_evaluate (when it records the checkpoint of that evaluation), as
// transformers' Trainer does in _save_checkpoint / _determine_best_metric. So the callback
// keeps no best value of its own; with a threshold, a small gain that does not count as an
// improvement still becomes the new best_metric, as in transformers.
//
// The counter is the callback's state (ExportableState, in transformers' layout: args
// early_stopping_patience and early_stopping_threshold, attribute early_stopping_patience_counter):
// every checkpoint and heal carries it, so a resume goes on counting where the run stopped
// (TrainingArguments::restore_callback_states_from_checkpoint, default true). A restore takes
// the counter; patience and threshold stay this run's.
// Thread-safety: training thread only. Not collective: every rank sees the same metrics (they
// are all-reduced) and so takes the same decision.
//
//   args.eval_strategy = "steps";
//   args.metric_for_best_model = "eval_loss";
//   trainer.add_callback(std::make_shared<tenax::sdk::EarlyStoppingCallback>(3, 0.0));
#pragma once

#include <cstdint>

#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {

class EarlyStoppingCallback : public TrainerCallback, public ExportableState {
 public:
  /// Stop after `patience` evaluations in a row without an improvement larger than
  /// `threshold`. Throws ConfigError when patience < 1 or threshold is negative or not finite.
  explicit EarlyStoppingCallback(std::int64_t patience = 1, double threshold = 0.0);

  /// Refuses (ConfigError naming the field) an empty metric_for_best_model or eval_strategy
  /// "no"; warns when load_best_model_at_end is off (the last model, not the best, is kept).
  void on_train_begin(const TrainingArguments& args, TrainerState& state, TrainerControl& control) override;
  /// Counts evaluations without improvement; checks the arguments as on_train_begin when it is
  /// the first hook called (a hand-written loop).
  void on_evaluate(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
                   const Logs& metrics) override;

  std::string state_name() const override { return "EarlyStoppingCallback"; }
  nlohmann::json state() const override;
  /// Throws StorageError when the counter is missing or not a non-negative integer.
  void restore_state(const nlohmann::json& state) override;

  /// Evaluations since the last improvement.
  std::int64_t patience_counter() const { return counter_; }
  std::int64_t patience() const { return patience_; }
  double threshold() const { return threshold_; }

 private:
  void check_arguments(const TrainingArguments& args, const TrainerState& state);

  std::int64_t patience_;
  double threshold_;
  std::int64_t counter_ = 0;
  bool arguments_checked_ = false;
};

}  // namespace tenax::sdk
