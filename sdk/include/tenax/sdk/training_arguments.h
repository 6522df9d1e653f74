// TrainingArguments: the knobs of a training run, with Hugging Face's names and meanings.
//
// A typed value object: fields are set directly (as in Python's dataclass) and `validate()`
// checks them, throwing ConfigError naming the field. Serialisable into the checkpoint manifest.
// Thread-safety: a plain value.
//
//   TrainingArguments args;
//   args.output_dir = "runs/demo";
//   args.max_steps = 200;
//   args.validate();
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace tenax::sdk {

struct TrainingArguments {
  std::string output_dir;                  ///< checkpoints and logs go here (required)
  double num_train_epochs = 3.0;           ///< used when max_steps <= 0
  std::int64_t max_steps = -1;             ///< > 0 overrides num_train_epochs
  std::int64_t per_device_train_batch_size = 8;
  std::int64_t per_device_eval_batch_size = 8;  ///< predict()/evaluate() batch per rank
  /// Micro-batches per optimizer step (gradients are synchronised once, after the last). On an
  /// elastic resume into another world size it is recomputed so that the global batch
  /// (world x per_device_train_batch_size x gradient_accumulation_steps) stays the checkpoint's.
  std::int64_t gradient_accumulation_steps = 1;
  double learning_rate = 5e-5;
  double weight_decay = 0.0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;              ///< <= 0 disables clipping
  std::string lr_scheduler_type = "linear";
  double warmup_ratio = 0.0;
  std::int64_t warmup_steps = 0;           ///< > 0 overrides warmup_ratio
  std::int64_t logging_steps = 10;
  std::int64_t save_steps = 500;           ///< 0 disables periodic saves
  std::int64_t save_total_limit = 0;       ///< keep this many newest checkpoints (+ the best); 0 = all
  std::string metric_for_best_model;       ///< e.g. "eval_loss"; its best checkpoint is never pruned
  bool greater_is_better = false;          ///< for metric_for_best_model
  /// Tenax: the step stalls only for the snapshot; a background writer does the I/O and the
  /// commit (false: every save completes before training goes on).
  bool save_async = true;
  /// Tenax: what a failed periodic save does: "continue" (log it, tell the callbacks, keep
  /// training; the previous checkpoint is intact) or "stop" (raise StorageError on every rank
  /// at the next save point). A failed final save always raises.
  std::string on_save_error = "continue";
  /// Tenax: SIGTERM / SIGUSR1 make every rank stop at the same step, save a checkpoint and
  /// return from train() with TrainOutput::preempted (the program then exits 3 to be requeued).
  bool handle_preemption_signals = true;
  std::uint64_t seed = 42;

  /// Throws ConfigError naming the first invalid field and the accepted values.
  void validate() const;
  /// Warmup steps for a run of `total_steps` (warmup_steps, else ceil(warmup_ratio * total)).
  std::int64_t resolved_warmup_steps(std::int64_t total_steps) const;
  nlohmann::json to_json() const;
};

}  // namespace tenax::sdk
