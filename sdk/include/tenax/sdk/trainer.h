// The Trainer: Hugging Face Trainer's shape in C++ on libtorch.
//
// It coordinates separate pieces — ResumableSampler (data order), GradSync (gradient
// averaging), LrSchedule, Checkpointer and the callbacks — and owns none of the distributed
// state: the WorkerContext of this generation is borrowed.
// train() first restores the newest committed checkpoint under args.output_dir (model,
// AdamW moments, this rank's RNG, data position, best metric), then trains to max_steps. After
// each step it logs, evaluates (on the dataset given to set_eval_dataset) and saves as the
// logging/eval/save strategies say ("steps", "epoch" or "no"), in that order, as
// transformers' Trainer does; callbacks may ask for any of the three through TrainerControl
// (identically on every rank: these are collective). The last step is always saved; with
// load_best_model_at_end the parameters of the checkpoint with the best metric_for_best_model
// are loaded at the end.
// predict() and evaluate() run the model in eval mode over another dataset, each rank on a
// contiguous shard, and gather the logits so that every rank gets all rows in dataset order.
// Thread-safety: one training thread. train(), predict() and evaluate() are collective (all
// ranks call them, in the same order).
//
//   tenax::sdk::Trainer trainer(model, args, dataset, ctx);
//   trainer.add_callback(std::make_shared<MyCallback>());
//   auto out = trainer.train();
//   Logs m = trainer.evaluate(*validation, compute_accuracy);   // {"eval_accuracy": ..., ...}
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/adamw.h>

#include "tenax/elastic/progress_file.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/data.h"
#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/model.h"
#include "tenax/sdk/prediction.h"
#include "tenax/sdk/state_capture.h"
#include "tenax/sdk/trainer_callback.h"
#include "tenax/sdk/training_arguments.h"
#include "tenax/sdk/user_state.h"

namespace tenax::sdk {

struct TrainOutput {
  std::int64_t global_step = 0;
  double training_loss = 0.0;       ///< mean loss over the steps run in this process
  double train_runtime_s = 0.0;
  double train_samples_per_second = 0.0;
  std::int64_t resumed_from_step = -1;
  /// A preemption signal stopped training: the checkpoint of global_step is saved. The program
  /// should exit tenax::kExitPreempted (3) so that the launcher asks for a requeue.
  bool preempted = false;
  int preempt_signal = 0;
};

class Trainer {
 public:
  /// `model` and `train_dataset` are shared with the caller; `context` is borrowed and must
  /// outlive the Trainer. Validates `args` (ConfigError naming the field).
  Trainer(std::shared_ptr<Model> model, TrainingArguments args,
          std::shared_ptr<const Dataset> train_dataset, elastic::WorkerContext& context,
          Collator collator = stack_collator);
  virtual ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void add_callback(std::shared_ptr<TrainerCallback> callback);
  /// Application state saved and restored atomically with the model (borrowed; it must
  /// outlive train()). Set it before train(), the same way on every rank.
  void set_user_state(UserState& user_state) { user_state_ = &user_state; }
  /// The dataset evaluate() runs on during train() (eval_strategy) and its metrics; needed when
  /// eval_strategy is not "no". Set it the same way on every rank.
  void set_eval_dataset(std::shared_ptr<const Dataset> eval_dataset, ComputeMetrics compute_metrics = {}) {
    eval_dataset_ = std::move(eval_dataset);
    compute_metrics_ = std::move(compute_metrics);
  }

  /// Collective. Restores, trains, saves. Throws on failure (the launcher restarts the job).
  /// A save fenced off because a newer generation formed (this process is in a stale
  /// partition) throws RendezvousError whatever on_save_error says: the program should exit
  /// non-zero (not kExitPreempted), and its agent re-joins the current generation.
  TrainOutput train();

  /// Collective. The model's logits and the labels for every sample of `dataset`, in dataset
  /// order, on every rank: each rank runs prediction_step over its contiguous shard in batches
  /// of per_device_eval_batch_size (eval mode, no autograd), then the rows are allgathered.
  /// metrics: <prefix>_loss (sample-weighted mean, when the batches carry labels),
  /// <prefix>_runtime, <prefix>_samples_per_second, and compute_metrics' values prefixed.
  /// The model's train/eval mode is restored afterwards. Fires on_predict.
  virtual PredictionOutput predict(const Dataset& dataset, const ComputeMetrics& compute_metrics = {},
                                   const std::string& metric_key_prefix = "test");
  /// Collective. predict()'s metrics with the "eval" prefix (eval_loss, eval_accuracy, ...),
  /// appended to state().log_history and reported through on_log and on_evaluate.
  virtual Logs evaluate(const Dataset& dataset, const ComputeMetrics& compute_metrics = {},
                        const std::string& metric_key_prefix = "eval");

  const TrainerState& state() const { return state_; }
  const TrainingArguments& args() const { return args_; }
  Model& model() { return *model_; }

 protected:
  /// The loss of one micro-batch (default: the model's own loss).
  virtual torch::Tensor compute_loss(Model& model, const Batch& batch);
  /// Forward and backward of one micro-batch (the loss divided by the number of micro-batches
  /// per step when accumulating); returns that detached loss.
  virtual torch::Tensor training_step(Model& model, const Batch& batch);
  /// Forward of one evaluation micro-batch without autograd (the model is in eval mode).
  virtual PredictionStepOutput prediction_step(Model& model, const Batch& batch);
  /// AdamW with args' betas and eps over transformers' two groups (adamw_param_groups):
  /// args.weight_decay for every trainable parameter but biases and LayerNorm parameters.
  virtual std::unique_ptr<torch::optim::AdamW> create_optimizer();
  /// The schedule for a run of `num_training_steps` optimizer steps.
  virtual LrSchedule create_scheduler(std::int64_t num_training_steps);

 private:
  NamedTensors named_parameters() const;
  bool restore(Checkpointer& checkpointer, torch::optim::AdamW& optimizer);
  /// `metrics`: the evaluation of this step, if there was one (best-model tracking).
  void save(Checkpointer& checkpointer, torch::optim::AdamW& optimizer, std::int64_t steps_per_epoch,
            const Logs& metrics);
  /// The step's log entry (loss averaged over ranks since the last one): collective.
  void log_training(double window_loss, std::int64_t window_steps, double lr, double seconds, double eta_seconds);
  /// The key of args.metric_for_best_model in evaluation metrics ("accuracy" -> "eval_accuracy").
  std::string best_metric_key() const;
  /// Reads the parameters of the checkpoint in `dir` into the model (load_best_model_at_end).
  void load_parameters_from(const std::filesystem::path& dir);
  /// Logs a finished save and tells the callbacks; raises StorageError when it failed and
  /// `must_succeed` (final save, or on_save_error = "stop"), RendezvousError when it was fenced
  /// (a newer generation formed), whatever on_save_error says.
  void report_save(const SaveResult& result, bool must_succeed);
  Batch load_batch(const std::vector<std::int64_t>& indices) const;
  /// predict() without the callback: shard, prediction_step, gather, metrics.
  PredictionOutput prediction_loop(const Dataset& dataset, const ComputeMetrics& compute_metrics,
                                   const std::string& metric_key_prefix);

  template <typename Fn>
  void notify(Fn&& fn) {
    for (auto& cb : callbacks_) fn(*cb);
  }

  std::shared_ptr<Model> model_;
  TrainingArguments args_;
  std::shared_ptr<const Dataset> train_dataset_;
  elastic::WorkerContext& context_;
  Collator collator_;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  UserState* user_state_ = nullptr;
  std::shared_ptr<const Dataset> eval_dataset_;
  ComputeMetrics compute_metrics_;
  TrainerState state_;
  TrainerControl control_;
  std::int64_t accumulation_steps_ = 1;  // of this run (may differ from args_ after a resize)
  /// Global batches of the data order that should_epoch_stop skipped: step s trains on batch
  /// s + skipped_steps_. Saved as the sampler's (epoch, cursor); 0 unless a callback used it.
  std::int64_t skipped_steps_ = 0;
  std::pair<std::int64_t, std::int64_t> restored_position_{0, 0};  ///< (epoch, cursor) of the loaded checkpoint
  /// Tells `tenax run --hang-timeout` that this worker is alive: every step and eval batch.
  elastic::ProgressFile progress_ = elastic::ProgressFile::from_env();
};

}  // namespace tenax::sdk
