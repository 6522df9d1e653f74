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
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>

#include "tenax/elastic/progress_file.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/data.h"
#include "tenax/sdk/loss_scale.h"
#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/model.h"
#include "tenax/sdk/prediction.h"
#include "tenax/sdk/recovered_error.h"
#include "tenax/sdk/sampler.h"
#include "tenax/sdk/state_capture.h"
#include "tenax/sdk/trainer_callback.h"
#include "tenax/sdk/training_arguments.h"
#include "tenax/sdk/user_state.h"

namespace tenax::sdk {

namespace detail {
class TrainingRun;
struct LiveRun;
}  // namespace detail

struct TrainOutput {
  std::int64_t global_step = 0;
  double training_loss = 0.0;  ///< mean loss over the steps run in this process
  double train_runtime_s = 0.0;
  double train_samples_per_second = 0.0;
  std::int64_t resumed_from_step = -1;
  /// A preemption signal stopped training: the checkpoint of global_step is saved. The program
  /// should exit tenax::kExitPreempted (3) so that the launcher asks for a requeue.
  bool preempted = false;
  int preempt_signal = 0;
  /// transformers' train() metrics, for log_metrics / save_metrics("train", ...): train_runtime,
  /// train_samples_per_second, train_loss.
  std::map<std::string, double> metrics() const;
};

class Trainer {
 public:
  /// `model` and `train_dataset` are shared with the caller; `context` is borrowed and must
  /// outlive the Trainer. Validates `args` (ConfigError naming the field). `train_dataset` may be
  /// null for a caller that supplies its own batches to step() (an embedding code); train()
  /// needs one.
  Trainer(std::shared_ptr<Model> model, TrainingArguments args, std::shared_ptr<const Dataset> train_dataset,
          elastic::WorkerContext& context, Collator collator = stack_collator);
  virtual ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void add_callback(std::shared_ptr<TrainerCallback> callback);
  /// transformers' pop_callback: removes `callback` (this very object) and returns it; null when
  /// it is not one of this trainer's. Change the callbacks before train(), the same way on every rank.
  std::shared_ptr<TrainerCallback> pop_callback(const TrainerCallback& callback);
  /// The first callback of type T (a default one too: ProgressBarCallback, JsonlMetricsCallback,
  /// TensorBoardCallback), removed and returned; null when there is none.
  template <typename T>
  std::shared_ptr<T> pop_callback() {
    for (auto it = callbacks_.begin(); it != callbacks_.end(); ++it) {
      if (auto typed = std::dynamic_pointer_cast<T>(*it)) {
        callbacks_.erase(it);
        return typed;
      }
    }
    return nullptr;
  }
  /// pop_callback without the result (transformers' remove_callback).
  void remove_callback(const TrainerCallback& callback) { pop_callback(callback); }
  template <typename T>
  void remove_callback() {
    pop_callback<T>();
  }
  /// The callbacks, in the order they are called.
  const std::vector<std::shared_ptr<TrainerCallback>>& callbacks() const { return callbacks_; }
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

  // One optimizer step at a time: the seam train() loops over, and what an embedding code (a
  // simulation, through the C API) drives between its solver steps. begin() once, then step()
  // as often as wanted, with save_checkpoint() / preemption_agreed() where the caller wants them,
  // then end() (optional for an embedding code: its own last save_checkpoint() is enough).

  /// Collective. Plans the run (global batch, gradient accumulation, schedule length: max_steps,
  /// else num_train_epochs of the training dataset), builds the optimizer, the schedule and the
  /// gradient sync, makes the replicas identical and, when `resume`, restores the newest
  /// committed checkpoint under output_dir (model, optimizer, RNG, data position, user state).
  /// Returns that checkpoint's label (save_checkpoint's), or nullopt. Once per Trainer.
  /// Without a training dataset (embedding) there is no data order: max_steps sets the
  /// schedule's length (when <= 0 the schedule never ends), step() takes the caller's batches,
  /// and save_strategy must be "no": the caller saves, with its own labels (ConfigError otherwise).
  std::optional<std::int64_t> begin(bool resume = true);
  /// Collective. One optimizer step on this rank's `micro_batches` (accumulation_steps() of them):
  /// forward and backward each, gradient sync, clipping, LR, optimizer, then on_step_end and the
  /// logging / evaluation / saving that the strategies and callbacks ask for. Returns this rank's
  /// loss of the step (the micro-batches' sum, each divided by their number). After begin().
  /// With enable_step_recovery() under in-process recovery, a lost peer does not end the call
  /// with PeerLostError: the job heals inside it and it throws RecoveredError (see there).
  double step(const std::vector<Batch>& micro_batches);
  /// Before begin(), on every rank: this caller drives step() itself and handles RecoveredError,
  /// so under `tenax run --recovery in-process` a lost peer is healed in process (a replacement
  /// takes its place and heals from a live peer in begin()) instead of every worker restarting
  /// from the newest checkpoint. On RecoveredError every rank stands at the last completed
  /// optimizer step, with its registered user state (set_user_state) put back in place to what it
  /// was when that step() was called; the caller goes on as if that step() had just returned
  /// (its own state outside the registered one must follow from the registered one). To make that
  /// possible every step() copies every rank's registered state to every rank (one allgather;
  /// user_state_mirror.h says why and what it costs). Without this call a run that recovers in
  /// process only for train() says so at begin() and is restarted from disk on a loss.
  void enable_step_recovery() { step_recovery_ = true; }
  /// Whether begin() took this run's state from live peers (a replacement that healed), not from
  /// disk. A replacement whose peers held no state either (across nodes every worker starts as a
  /// replacement: in a job's first generation nobody does) starts from disk like any other.
  bool healed_at_begin() const { return healed_at_begin_; }
  /// After a collective of this run other than step() (save_checkpoint(), wait_for_checkpoint(),
  /// preemption_agreed(), or the caller's own on the context's communicator) threw PeerLostError
  /// or TimeoutError: heals the job in process as step() would and returns the optimizer step it
  /// stands at (the caller goes on as after RecoveredError). nullopt when this run does not heal
  /// steps in process (no enable_step_recovery(), no in-process recovery, or no begin()): the
  /// caller rethrows its error.
  std::optional<std::int64_t> recover(const std::string& why);
  /// Collective: the signal any rank received (SIGUSR1, SIGTERM), or 0; every rank gets the same
  /// answer at the same call. Right after a step() the answer came with that step's gradients (no
  /// collective of its own); otherwise one small allreduce. 0 when handle_preemption_signals is off.
  int preemption_agreed();
  /// Collective, asynchronous: a checkpoint now, named by `label` (default: the optimizer step).
  /// An embedding code labels it with its solver step; the optimizer step is saved beside it.
  /// The previous save's failure is reported here (as on_save_error says).
  void save_checkpoint(std::optional<std::int64_t> label = std::nullopt);
  /// Collective: waits until the save in flight is committed; throws StorageError when it failed
  /// (RendezvousError when fenced).
  void wait_for_checkpoint();
  /// Collective. Saves the last step unless it is saved (with a training dataset; an embedding
  /// caller saves its own, labelled checkpoints), waits for the commit, loads the best
  /// model (load_best_model_at_end, unless preempted), fires on_preempt and on_train_end.
  TrainOutput end(int preempt_signal = 0);
  /// Not collective: the model's output for one batch in eval mode without autograd (the model's
  /// mode is restored afterwards).
  ModelOutput predict_batch(const Batch& batch);
  /// Hands `logs` to every callback's on_log (JSONL, TensorBoard, the progress bar, the caller's
  /// own), as transformers' Trainer.log does, recorded at `step`: by default the optimizer
  /// step; an embedding caller passes its own (a solver step). The Trainer's state is left as
  /// it is (the values are not added to log_history, and a flag a callback raises in this
  /// on_log is not acted upon: these are the caller's values, not a training step's). Not
  /// collective: the sinks write on rank 0 only.
  void log(const Logs& logs, std::optional<std::int64_t> step = std::nullopt);
  /// transformers' log_metrics, save_metrics and save_state, on rank 0 only (the others return):
  /// `split` metrics as an aligned block in the log ("***** eval metrics *****", *_runtime as
  /// h:mm:ss.ss, other values to 4 decimals); <output_dir>/<split>_results.json, and merged into
  /// <output_dir>/all_results.json when `combined`; <output_dir>/trainer_state.json (the state a
  /// checkpoint's manifest records). Each file is replaced atomically. Throws StorageError naming
  /// the file, or a broken all_results.json.
  void log_metrics(const std::string& split, const Logs& metrics) const;
  void save_metrics(const std::string& split, const Logs& metrics, bool combined = true) const;
  void save_state() const;
  /// The gradient accumulation steps of this run (set by begin(): an elastic resize changes it).
  std::int64_t accumulation_steps() const { return accumulation_steps_; }

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
  /// The loss of one micro-batch: the model's own, or with label_smoothing_factor > 0 transformers'
  /// label-smoothed loss of its logits.
  virtual torch::Tensor compute_loss(Model& model, const Batch& batch);
  /// Forward and backward of one micro-batch (the loss divided by the number of micro-batches
  /// per step when accumulating); returns that detached loss.
  virtual torch::Tensor training_step(Model& model, const Batch& batch);
  /// Forward of one evaluation micro-batch without autograd (the model is in eval mode).
  virtual PredictionStepOutput prediction_step(Model& model, const Batch& batch);
  /// The optimizer of args.optim over transformers' two groups (create_optimizer_for):
  /// args.weight_decay for every trainable parameter but biases and LayerNorm parameters. An
  /// override must return an optimizer whose state Tenax checkpoints (AdamW, SGD, Adafactor:
  /// checkpointable_optimizer_name), else begin() refuses it.
  virtual std::unique_ptr<torch::optim::Optimizer> create_optimizer();
  /// The schedule for a run of `num_training_steps` optimizer steps.
  virtual LrSchedule create_scheduler(std::int64_t num_training_steps);
  /// fp16's loss scaling: torch.amp.GradScaler's defaults, as transformers uses them (Accelerate's
  /// GradScalerKwargs is the Python way to change them).
  virtual GradScalerOptions grad_scaler_options() const { return {}; }

 private:
  NamedTensors named_parameters() const;
  /// The model's output with the loss compute_loss and prediction_step report: the model's own,
  /// or the label-smoothed one (as transformers, whose evaluation loss is smoothed too).
  ModelOutput forward_with_loss(Model& model, const Batch& batch) const;
  /// step() without in-process recovery (train() loops over it and recovers by itself).
  double take_step(const std::vector<Batch>& micro_batches);
  /// Collective: the input tokens of every rank's `micro_batches` (include_num_input_tokens_seen).
  std::int64_t input_tokens(const std::vector<Batch>& micro_batches);
  /// The live state a TrainingSnapshot is captured from and applied to (training_snapshot.h).
  detail::LiveRun live_run(const NamedTensors& parameters);
  /// begin()'s plan of the run: global batch, accumulation, schedule, optimizer, gradient sync.
  void plan_run(bool resume);
  /// begin() on a replacement: its state from a live peer (trainer_heal.cpp). False, and nothing
  /// restored, when this rank is no replacement or no rank holds state.
  bool begin_from_peers();
  /// begin() otherwise: identical replicas, then the newest committed checkpoint when `resume`
  /// (trainer_checkpoint.cpp). Returns restore()'s label.
  std::optional<std::int64_t> begin_from_disk(bool resume);
  /// The label (step) of the checkpoint restored, or nullopt when there was none.
  std::optional<std::int64_t> restore();
  /// Throws std::logic_error naming `call` when begin() has not run.
  detail::TrainingRun& run(const char* call);
  /// `metrics`: the evaluation of this step, if there was one (best-model tracking).
  /// `label`: the checkpoint's name (default: the optimizer step).
  void save(const Logs& metrics, std::optional<std::int64_t> label = std::nullopt);
  /// The step's log entry (loss averaged over ranks since the last one): collective.
  void log_training(double window_loss, std::int64_t window_steps, double lr, double seconds, double eta_seconds);
  /// The key of args.metric_for_best_model in evaluation metrics ("accuracy" -> "eval_accuracy").
  std::string best_metric_key() const;
  /// Whether `metrics` improve the best metric_for_best_model so far (transformers' comparison).
  bool is_new_best(const Logs& metrics) const;
  /// Reads the parameters of the checkpoint in `dir` into the model (load_best_model_at_end).
  void load_parameters_from(const std::filesystem::path& dir);
  /// Logs a finished save and tells the callbacks, as its SaveOutcome says: raises StorageError
  /// when it failed and `must_succeed` (final save, or on_save_error = "stop"), RendezvousError
  /// when it was fenced (a newer generation formed) whatever on_save_error says, and
  /// PeerLostError when a peer was lost (the loop heals in process).
  void report_save(const SaveResult& result, bool must_succeed);
  /// Logs how long train()'s loop waited for batches, of `train_seconds`, and what to set
  /// when the data path sets the step rate.
  void report_data_wait(double waited_seconds, double train_seconds) const;
  /// predict() without the callback: shard, prediction_step, gather, metrics.
  PredictionOutput prediction_loop(const Dataset& dataset, const ComputeMetrics& compute_metrics,
                                   const std::string& metric_key_prefix);

  /// Collective: the evaluation and the save that control_ asks for after a step (log first).
  void act_on_control(double lr);

  /// In-process recovery (DESIGN.md decision 13), after a collective of this generation failed
  /// with `why`: rejoins the next generation with this process's state and heals it. False when
  /// this job does not recover in process (the caller rethrows: the agent restarts the job).
  bool recover_in_process(const std::string& why);
  /// heal_from_peers() until it succeeds: a peer lost while a generation heals sends every rank
  /// to the next one. `rejoin_first`: leave the current generation before the first try.
  /// False when no rank holds state (heal_from_peers).
  bool heal_until_healed(std::chrono::steady_clock::time_point since, bool rejoin_first);
  /// Collective over the new generation: the rank with the newest state sends its parameters,
  /// optimizer state, step and every rank's mirrored RNG state; every rank continues from there.
  /// `since`: when the failure was noticed (for the log's recovery time). False, on every rank,
  /// when no rank holds state to send (every one is a replacement): nothing changed.
  bool heal_from_peers(std::chrono::steady_clock::time_point since);
  /// TrainerState::stateful_callbacks from the callbacks that export their state: before a
  /// snapshot is captured (a save, a heal's source).
  void export_callback_states();
  /// The callbacks' state from TrainerState::stateful_callbacks, as restored from `where`.
  void restore_callback_states(const std::string& where);
  /// After a rejoin: this rank's number, and the plan for the world's size, which a lost node
  /// shrank (the same `global_batch` through gradient accumulation).
  void adapt_to_world(std::int64_t global_batch);

  template <typename Fn>
  void notify(Fn&& fn) {
    for (auto& cb : callbacks_) fn(*cb);
  }

  std::shared_ptr<Model> model_;
  torch::Device device_{torch::kCPU};  // cuda:<local rank> where CUDA is visible, unless use_cpu
  TrainingArguments args_;
  std::shared_ptr<const Dataset> train_dataset_;
  elastic::WorkerContext& context_;
  Collator collator_;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  UserState* user_state_ = nullptr;
  bool step_recovery_ = false;    ///< enable_step_recovery()
  bool healed_at_begin_ = false;  ///< healed_at_begin()
  std::shared_ptr<const Dataset> eval_dataset_;
  ComputeMetrics compute_metrics_;
  TrainerState state_;
  TrainerControl control_;
  std::int64_t accumulation_steps_ = 1;  // of this run (may differ from args_ after a resize)
  /// Global batches of the data order that should_epoch_stop skipped: step s trains on batch
  /// s + skipped_steps_. Saved as the sampler's (epoch, cursor); 0 unless a callback used it.
  std::int64_t skipped_steps_ = 0;
  SamplerPosition restored_position_;  ///< of the loaded checkpoint
  /// Everything begin() builds for the run (checkpointer, optimizer, schedule, sync, sampler,
  /// counters); null before begin().
  std::unique_ptr<detail::TrainingRun> run_;
  /// Tells `tenax run --hang-timeout` that this worker is alive: every step and eval batch.
  elastic::ProgressFile progress_ = elastic::ProgressFile::from_env();
};

}  // namespace tenax::sdk
