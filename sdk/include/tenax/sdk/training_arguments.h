// TrainingArguments: the knobs of a training run, with Hugging Face's names and meanings.
//
// A typed value object: fields are set directly (as in Python's dataclass) and `validate()`
// checks them, throwing ConfigError naming the field. The options with a fixed set of values
// (the strategies, lr_scheduler_type, on_save_error) are Choices (choice.h): enums that also
// take transformers' spellings ("steps"), parsed where they are assigned. `for_each_field` is the one list of the
// fields and their names: the manifest record (to_json), the TOML file and the command-line
// overrides all go through it, so a field added here is known everywhere.
// Thread-safety: a plain value.
//
//   TrainingArguments args;
//   args.output_dir = "runs/demo";
//   args.max_steps = 200;
//   args.validate();
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tenax/sdk/choice.h"
#include "tenax/sdk/lr_schedule.h"

namespace tenax::sdk {

/// When to log, evaluate or save: transformers' IntervalStrategy ("no", "steps", "epoch").
enum class IntervalStrategy : std::uint8_t { kNo, kSteps, kEpoch };
template <>
struct ChoiceSpellings<IntervalStrategy> {
  static constexpr const char* kNames[] = {"no", "steps", "epoch"};
};

/// When to save: transformers' SaveStrategy, IntervalStrategy's three and "best" (after an
/// evaluation that improved metric_for_best_model).
enum class SaveStrategy : std::uint8_t { kNo, kSteps, kEpoch, kBest };
template <>
struct ChoiceSpellings<SaveStrategy> {
  static constexpr const char* kNames[] = {"no", "steps", "epoch", "best"};
};

/// What a failed periodic save does (TrainingArguments::on_save_error): "continue" or "stop".
enum class SaveErrorPolicy : std::uint8_t { kContinue, kStop };
template <>
struct ChoiceSpellings<SaveErrorPolicy> {
  static constexpr const char* kNames[] = {"continue", "stop"};
};

/// The optimizer (transformers' OptimizerNames, the ones Tenax has): create_optimizer_for
/// (tenax/sdk/optimizer_groups.h) builds each as transformers' Trainer does.
enum class OptimizerName : std::uint8_t { kAdamWTorch, kAdamWTorchFused, kSgd, kAdafactor };
template <>
struct ChoiceSpellings<OptimizerName> {
  static constexpr const char* kNames[] = {"adamw_torch", "adamw_torch_fused", "sgd", "adafactor"};
};

struct TrainingArguments {
  std::string output_dir;         ///< checkpoints and logs go here (required)
  double num_train_epochs = 3.0;  ///< used when max_steps <= 0
  std::int64_t max_steps = -1;    ///< > 0 overrides num_train_epochs
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
  double max_grad_norm = 1.0;  ///< <= 0 disables clipping
  /// In [0, 1): single-label classification losses against (1 - f) x the label + f x uniform,
  /// as transformers' LabelSmoother computes them (0: the model's own loss).
  double label_smoothing_factor = 0.0;
  /// linear, cosine, cosine_with_restarts, polynomial, constant, constant_with_warmup
  Choice<LrSchedulerType> lr_scheduler_type = LrSchedulerType::kLinear;
  /// transformers' lr_scheduler_kwargs, typed. Used only by the schedules that take them.
  struct LrSchedulerKwargs {
    double num_cycles = -1.0;  ///< cosine: 0.5, cosine_with_restarts: 1 when < 0 (transformers' defaults)
    double lr_end = 1e-7;      ///< polynomial: the final rate (absolute, not a multiplier)
    double power = 1.0;        ///< polynomial
  } lr_scheduler_kwargs;
  double warmup_ratio = 0.0;
  std::int64_t warmup_steps = 0;  ///< > 0 overrides warmup_ratio
  /// "no", "steps" (every logging_steps) or "epoch"
  Choice<IntervalStrategy> logging_strategy = IntervalStrategy::kSteps;
  std::int64_t logging_steps = 10;
  /// "no", "steps" (every eval_steps) or "epoch"; needs an eval dataset (Trainer::set_eval_dataset)
  Choice<IntervalStrategy> eval_strategy = IntervalStrategy::kNo;
  std::int64_t eval_steps = 0;  ///< 0: logging_steps (as transformers)
  /// "no", "steps" (every save_steps) or "epoch". The last step is always saved.
  Choice<SaveStrategy> save_strategy = SaveStrategy::kSteps;
  std::int64_t save_steps = 500;      ///< 0 disables periodic saves
  std::int64_t save_total_limit = 0;  ///< keep this many newest checkpoints (+ the best); 0 = all
  std::string metric_for_best_model;  ///< e.g. "eval_loss"; its best checkpoint is never pruned
  /// For metric_for_best_model. Unset (transformers' None): true unless metric_for_best_model
  /// ends in "loss", as transformers infers it; resolved_greater_is_better() applies the rule.
  std::optional<bool> greater_is_better;
  /// Evaluate once before the first step (and before the first step after a resume), as
  /// transformers does; needs an eval dataset.
  bool eval_on_start = false;
  /// At the end, load the checkpoint with the best metric_for_best_model (needs eval and save
  /// strategies that coincide, as in transformers).
  bool load_best_model_at_end = false;
  /// Train on the CPU even where CUDA devices are visible (else each rank takes cuda:<local rank>).
  bool use_cpu = false;
  /// Forward and loss under bf16 autocast (CPU and CUDA); master weights stay float32.
  bool bf16 = false;
  /// Forward and loss under float16 autocast with dynamic loss scaling (tenax/sdk/loss_scale.h);
  /// master weights stay float32. CUDA, and CPUs where libtorch has float16 autocast (torch >= 2.4;
  /// Debian's libtorch 1.13 has not). Not with bf16.
  bool fp16 = false;
  /// Each encoder layer's activations recomputed during backward instead of kept (less memory,
  /// about one more forward per step): Model::set_gradient_checkpointing. BERT, DistilBERT, ViT.
  bool gradient_checkpointing = false;
  /// On a resume, start the epoch the checkpoint was in from its first batch instead of its
  /// position in it (transformers' meaning; the run then differs from an uninterrupted one).
  bool ignore_data_skip = false;
  /// Checkpoints hold the parameters, the data position and the TrainerState only, not the
  /// optimizer state or the random streams (transformers' meaning: less storage). A resume from
  /// one goes on at its step and data position with a fresh optimizer, and says so.
  bool save_only_model = false;
  /// transformers' gradient_checkpointing_kwargs, typed: use_reentrant is torch.utils.checkpoint's
  /// (true, transformers' default, is what Tenax does; false needs Python's saved-tensor hooks).
  struct GradientCheckpointingKwargs {
    bool use_reentrant = true;
  } gradient_checkpointing_kwargs;
  /// The optimizer: "adamw_torch" and "adamw_torch_fused" (the same AdamW, torch's fused kernel
  /// where libtorch has it), "sgd", "adafactor"; see create_optimizer_for.
  Choice<OptimizerName> optim = OptimizerName::kAdamWTorch;
  /// Whether an epoch's last, incomplete global batch is dropped. Tenax's default is true
  /// (transformers': false), so that every step averages the same number of samples; false adds
  /// that batch as a last, smaller step, padded to a multiple of the world size with the epoch's
  /// first samples as torch's DistributedSampler pads. Training only: evaluation sees every sample.
  bool dataloader_drop_last = true;
  /// Threads that load the next steps' batches while a step computes (transformers: DataLoader
  /// worker processes); 0, transformers' default, loads each step's batches in the training
  /// loop. With threads, the dataset's get_for_epoch() and the collator run beside the step:
  /// they must be thread-safe and must not draw from torch's global generator (the SDK's
  /// datasets qualify; Dataset in data.h).
  std::int64_t dataloader_num_workers = 0;
  /// Steps each thread loads ahead (transformers: batches per worker); 0 (unset): 2, torch's
  /// default. Only with dataloader_num_workers > 0, as in transformers.
  std::int64_t dataloader_prefetch_factor = 0;
  /// Samples of similar length in the same batches (transformers' LengthGroupedSampler: the
  /// shuffled order cut into mega-batches, each sorted longest first), lengths from
  /// Dataset::length. Less padding; the order is still a pure function of (seed, epoch).
  bool group_by_length = false;
  /// Count the input tokens trained on (every rank's input_ids, padding included, as
  /// transformers counts them) into TrainerState::num_input_tokens_seen, logged with every log.
  bool include_num_input_tokens_seen = false;
  /// Deterministic algorithms everywhere (torch's use_deterministic_algorithms), one interop thread.
  bool full_determinism = false;
  /// No progress bar (rank 0 prints one by default: step/total, loss, rate, samples/s, ETA).
  bool disable_tqdm = false;
  /// Where metrics go: any of "jsonl" (<logging_dir>/metrics.jsonl), "tensorboard"
  /// (<logging_dir>/events.out.tfevents.*), or "none".
  std::vector<std::string> report_to = {"jsonl", "tensorboard"};
  std::string logging_dir;  ///< "" : <output_dir>/runs
  /// Tenax: the step stalls only for the snapshot; a background writer does the I/O and the
  /// commit (false: every save completes before training goes on).
  bool save_async = true;
  /// Tenax: what a failed periodic save does: "continue" (log it, tell the callbacks, keep
  /// training; the previous checkpoint is intact) or "stop" (raise StorageError on every rank
  /// at the next save point). A failed final save always raises, and so does a save fenced
  /// off by a newer generation (RendezvousError: this process is in a stale partition).
  Choice<SaveErrorPolicy> on_save_error = SaveErrorPolicy::kContinue;
  /// Where the run starts (transformers' resume_from_checkpoint, which Tenax reads from the
  /// arguments): "" or "true", the newest committed checkpoint in output_dir; a checkpoint's step
  /// directory, used while output_dir holds none of its own (after the first save a restart goes
  /// on from the run's own newest); "false", from scratch, where output_dir holds no checkpoint.
  /// What cannot be followed safely is refused (sdk/src/resume_choice.h).
  std::string resume_from_checkpoint;
  /// A resume gives the callbacks that export their state (ExportableState: early stopping's
  /// patience counter) the state the checkpoint saved. transformers' default is false; Tenax's is
  /// true, because a resume is meant to go on as if nothing had happened. A heal in process
  /// always restores it: every rank must take the same decisions.
  bool restore_callback_states_from_checkpoint = true;
  /// Tenax: SIGTERM / SIGUSR1 make every rank stop at the same step, save a checkpoint and
  /// return from train() with TrainOutput::preempted (the program then exits 3 to be requeued).
  bool handle_preemption_signals = true;
  /// Gradients are allreduced in buckets of at most this many MiB (transformers' name).
  std::int64_t ddp_bucket_cap_mb = 25;
  /// Tenax: allreduce a bucket as soon as backward has finished its gradients, while backward
  /// goes on (DDP's overlap); false: every bucket after backward. The same bits either way.
  bool ddp_overlap_backward = true;
  std::uint64_t seed = 42;
  /// The seed of the data order alone (transformers' data_seed); < 0 (unset): seed's.
  std::int64_t data_seed = -1;

  /// Throws ConfigError naming the first invalid field and the accepted values.
  void validate() const;
  /// Warmup steps for a run of `total_steps` (warmup_steps, else ceil(warmup_ratio * total)).
  std::int64_t resolved_warmup_steps(std::int64_t total_steps) const;
  /// Eval every this many steps (eval_steps, or logging_steps when 0).
  std::int64_t resolved_eval_steps() const { return eval_steps > 0 ? eval_steps : logging_steps; }
  /// The seed of the sampler's order: data_seed when set, else seed.
  std::uint64_t resolved_data_seed() const { return data_seed >= 0 ? static_cast<std::uint64_t>(data_seed) : seed; }
  /// greater_is_better when set, else whether metric_for_best_model does not end in "loss".
  bool resolved_greater_is_better() const;
  std::string resolved_logging_dir() const { return logging_dir.empty() ? output_dir + "/runs" : logging_dir; }
  /// Every field by name (nested ones dotted: "lr_scheduler_kwargs.power"); greater_is_better
  /// as resolved, so that a checkpoint records the direction its best model was chosen in.
  nlohmann::json to_json() const;
};

/// Calls `visit(name, field)` for every field of `args` in declaration order; `field` is a
/// reference to std::string, double, std::int64_t, std::uint64_t, bool, std::optional<bool>,
/// std::vector<std::string> or a Choice (a ChoiceBase: its spelling in files and the manifest). Works on const and
/// non-const arguments.
template <typename Args, typename Visitor>
void for_each_field(Args& args, Visitor&& visit) {
  visit("output_dir", args.output_dir);
  visit("num_train_epochs", args.num_train_epochs);
  visit("max_steps", args.max_steps);
  visit("per_device_train_batch_size", args.per_device_train_batch_size);
  visit("per_device_eval_batch_size", args.per_device_eval_batch_size);
  visit("gradient_accumulation_steps", args.gradient_accumulation_steps);
  visit("learning_rate", args.learning_rate);
  visit("weight_decay", args.weight_decay);
  visit("adam_beta1", args.adam_beta1);
  visit("adam_beta2", args.adam_beta2);
  visit("adam_epsilon", args.adam_epsilon);
  visit("max_grad_norm", args.max_grad_norm);
  visit("label_smoothing_factor", args.label_smoothing_factor);
  visit("lr_scheduler_type", args.lr_scheduler_type);
  visit("lr_scheduler_kwargs.num_cycles", args.lr_scheduler_kwargs.num_cycles);
  visit("lr_scheduler_kwargs.lr_end", args.lr_scheduler_kwargs.lr_end);
  visit("lr_scheduler_kwargs.power", args.lr_scheduler_kwargs.power);
  visit("warmup_ratio", args.warmup_ratio);
  visit("warmup_steps", args.warmup_steps);
  visit("logging_strategy", args.logging_strategy);
  visit("logging_steps", args.logging_steps);
  visit("eval_strategy", args.eval_strategy);
  visit("eval_steps", args.eval_steps);
  visit("save_strategy", args.save_strategy);
  visit("save_steps", args.save_steps);
  visit("save_total_limit", args.save_total_limit);
  visit("metric_for_best_model", args.metric_for_best_model);
  visit("greater_is_better", args.greater_is_better);
  visit("eval_on_start", args.eval_on_start);
  visit("load_best_model_at_end", args.load_best_model_at_end);
  visit("use_cpu", args.use_cpu);
  visit("bf16", args.bf16);
  visit("fp16", args.fp16);
  visit("gradient_checkpointing", args.gradient_checkpointing);
  visit("ignore_data_skip", args.ignore_data_skip);
  visit("save_only_model", args.save_only_model);
  visit("gradient_checkpointing_kwargs.use_reentrant", args.gradient_checkpointing_kwargs.use_reentrant);
  visit("optim", args.optim);
  visit("dataloader_drop_last", args.dataloader_drop_last);
  visit("dataloader_num_workers", args.dataloader_num_workers);
  visit("dataloader_prefetch_factor", args.dataloader_prefetch_factor);
  visit("group_by_length", args.group_by_length);
  visit("include_num_input_tokens_seen", args.include_num_input_tokens_seen);
  visit("full_determinism", args.full_determinism);
  visit("disable_tqdm", args.disable_tqdm);
  visit("report_to", args.report_to);
  visit("logging_dir", args.logging_dir);
  visit("save_async", args.save_async);
  visit("on_save_error", args.on_save_error);
  visit("resume_from_checkpoint", args.resume_from_checkpoint);
  visit("restore_callback_states_from_checkpoint", args.restore_callback_states_from_checkpoint);
  visit("handle_preemption_signals", args.handle_preemption_signals);
  visit("ddp_bucket_cap_mb", args.ddp_bucket_cap_mb);
  visit("ddp_overlap_backward", args.ddp_overlap_backward);
  visit("seed", args.seed);
  visit("data_seed", args.data_seed);
}

}  // namespace tenax::sdk
