// Callback hooks of the Trainer, in the shape of transformers.TrainerCallback.
//
// Every hook receives the run's arguments, the mutable TrainerState and the TrainerControl
// flags a callback may set to steer the loop. Hooks run on the training thread of every rank.
// Thread-safety: called from the training thread only.
//
//   struct StopAt : tenax::sdk::TrainerCallback {
//     void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl& c) override {
//       if (s.global_step == 100) c.should_training_stop = true;
//     }
//   };
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tenax/sdk/loss_scale.h"
#include "tenax/sdk/training_arguments.h"

namespace tenax::sdk {

/// What the loop knows about the run; saved in every checkpoint.
struct TrainerState {
  std::int64_t global_step = 0;  ///< optimizer steps done
  double epoch = 0.0;            ///< fractional epochs done
  std::int64_t max_steps = 0;
  std::int64_t num_train_epochs = 0;
  std::int64_t logging_steps = 0;
  std::int64_t save_steps = 0;
  std::int64_t train_batch_size = 0;  ///< global batch (all ranks)
  int world_size = 1;
  int rank = 0;
  std::int64_t generation = 0;
  std::int64_t resumed_from_step = -1;  ///< -1 when the run started from scratch
  std::int64_t eval_steps = 0;
  std::vector<nlohmann::json> log_history;
  /// The best value of args.metric_for_best_model seen by an evaluation so far, and the
  /// checkpoint saved at that step ("" until one is). Saved in every checkpoint.
  std::optional<double> best_metric;
  std::string best_model_checkpoint;
  /// The state of the callbacks that export it (ExportableState), by state_name(): one object,
  /// or a list when several callbacks share the name, as transformers' TrainerState keeps it.
  /// Filled at every save and heal; what a resume restores when
  /// TrainingArguments::restore_callback_states_from_checkpoint.
  nlohmann::json stateful_callbacks = nlohmann::json::object();
  /// fp16's loss scale (tenax/sdk/loss_scale.h); nullopt when the run does not train in fp16.
  std::optional<LossScaleState> loss_scale;
  /// Input tokens trained on by all ranks so far (TrainingArguments::include_num_input_tokens_seen;
  /// 0 without it), as transformers' TrainerState counts them.
  std::int64_t num_input_tokens_seen = 0;
  bool is_world_process_zero() const { return rank == 0; }
  /// What a checkpoint's manifest records (not rank and resumed_from_step: they are this process's).
  nlohmann::json to_json() const;
  /// to_json()'s fields read back; one missing or of another type keeps its default (a checkpoint
  /// of an older build may lack some).
  static TrainerState from_json(const nlohmann::json& json);
};

/// Flags a callback sets to change what the loop does next. Reset by the loop after use.
struct TrainerControl {
  bool should_training_stop = false;
  bool should_epoch_stop = false;
  bool should_save = false;
  bool should_evaluate = false;
  bool should_log = false;
};

using Logs = std::map<std::string, double>;

/// A callback whose state a checkpoint keeps, so that a resume or an in-process heal goes on
/// with it (transformers' ExportableState): EarlyStoppingCallback's patience counter, say. A
/// callback opts in by deriving from both TrainerCallback and ExportableState.
class ExportableState {
 public:
  virtual ~ExportableState() = default;
  /// The key its state is saved under; transformers uses the class name.
  virtual std::string state_name() const = 0;
  /// {"args": {...}, "attributes": {...}}, as transformers writes it: what the callback was made
  /// with, and what it has learnt since.
  virtual nlohmann::json state() const = 0;
  /// Takes back what state() gave. Throws StorageError when `state` is not one of its own.
  virtual void restore_state(const nlohmann::json& state) = 0;
};

class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  virtual void on_init_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_train_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_train_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_epoch_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_epoch_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_step_begin(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_step_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  /// After each micro-batch but the last of a step with gradient accumulation.
  virtual void on_substep_end(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  virtual void on_log(const TrainingArguments&, TrainerState&, TrainerControl&, const Logs&) {}
  /// After Trainer::evaluate, with its prefixed metrics (eval_loss, eval_accuracy, ...).
  virtual void on_evaluate(const TrainingArguments&, TrainerState&, TrainerControl&, const Logs& /*metrics*/) {}
  /// After Trainer::predict, with its prefixed metrics (test_loss, ...).
  virtual void on_predict(const TrainingArguments&, TrainerState&, TrainerControl&, const Logs& /*metrics*/) {}
  /// After a checkpoint committed; `checkpoint_dir` is the committed directory. With async
  /// saves this comes when the commit is known: at the next save point or the end of training,
  /// on every rank at the same step.
  virtual void on_save(const TrainingArguments&, TrainerState&, TrainerControl&,
                       const std::string& /*checkpoint_dir*/) {}
  /// A save failed (nothing was committed; the previous checkpoint is intact). `error` names
  /// the rank and file. Called on every rank at the next save point or at the end of training.
  virtual void on_save_error(const TrainingArguments&, TrainerState&, TrainerControl&, const std::string& /*error*/) {}
  /// Every rank agreed to stop for a preemption signal; the checkpoint of this step is saved.
  /// train() returns right after, with TrainOutput::preempted set.
  virtual void on_preempt(const TrainingArguments&, TrainerState&, TrainerControl&, int /*signal*/) {}
  /// At the start of train() in a restarted generation (the launcher restarted the workers
  /// after a failure, a node loss or a requeue); before on_load. state.generation says which.
  virtual void on_restart(const TrainingArguments&, TrainerState&, TrainerControl&) {}
  /// After state was restored from a checkpoint at the start of train().
  virtual void on_load(const TrainingArguments&, TrainerState&, TrainerControl&,
                       const std::string& /*checkpoint_dir*/) {}
};

}  // namespace tenax::sdk
