// Which TrainingArguments changed since a checkpoint was written, and whether resuming from it
// with the new ones is still the same run.
//
// A checkpoint manifest records TrainingArguments::to_json() (a flat object keyed by the
// for_each_field names). On resume, diff_arguments compares it with this run's arguments; each
// change is either
//   breaking  the resumed run would silently become another run: the data order (seed), the
//             optimizer's update (learning_rate, weight_decay, adam_*, max_grad_norm), the
//             schedule (lr_scheduler_type and its kwargs, warmup_*, and max_steps /
//             num_train_epochs, which fix its length), the arithmetic (bf16,
//             full_determinism), or which checkpoint counts as best (metric_for_best_model,
//             greater_is_better: the recorded best_metric was measured with the old ones).
//             The caller refuses to resume: breaking_changes_message says what to do.
//   harmless  where things go and how often (output_dir, logging_dir, report_to, logging /
//             eval / save strategies and cadences, save_total_limit, save_async,
//             on_save_error, disable_tqdm, handle_preemption_signals, load_best_model_at_end,
//             ddp_bucket_cap_mb, ddp_overlap_backward, use_cpu),
//             the evaluation batch, and the split of the global batch
//             (per_device_train_batch_size, gradient_accumulation_steps): the Trainer keeps the
//             checkpoint's global batch and refuses one it cannot divide. Logged, not refused.
// A breaking field that neither run uses is harmless: num_train_epochs when max_steps > 0 in
// both, warmup_ratio when warmup_steps > 0 in both. Keys only one side knows (a manifest from
// an older or newer build) are harmless notes: the value cannot have been applied here. An
// empty or missing record (a manifest from before arguments were recorded) gives no changes.
//
// Thread-safety: pure functions.
//
//   const auto changes = diff_arguments(manifest.arguments, args);
//   for (const auto& c : changes) if (c.kind == ArgumentChangeKind::kHarmless) log->info(describe(c));
//   if (has_breaking(changes)) throw ConfigError(breaking_changes_message(changes, dir));
//
// Private to the SDK (under sdk/src: not installed).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tenax/sdk/training_arguments.h"

namespace tenax::sdk {

enum class ArgumentChangeKind {
  kBreaking,  ///< resuming would silently change the run: refuse
  kHarmless,  ///< log it and resume
};

/// One field whose value differs between the checkpoint and this run.
struct ArgumentChange {
  std::string name;         ///< the for_each_field name ("lr_scheduler_kwargs.power"), or the recorded key
  nlohmann::json recorded;  ///< the checkpoint's value; null when it did not record this field
  nlohmann::json current;   ///< this run's value; null when this build has no such field
  ArgumentChangeKind kind = ArgumentChangeKind::kBreaking;
  std::string reason;  ///< why it is breaking or harmless, in a few words
};

/// The changes from `recorded` (a manifest's arguments) to `current`, in for_each_field order,
/// then the recorded keys this build does not know. Never throws on an odd record.
std::vector<ArgumentChange> diff_arguments(const nlohmann::json& recorded, const TrainingArguments& current);

/// How a change of the field `name` is classified; nullopt for a name that is not a field.
std::optional<ArgumentChangeKind> argument_change_kind(const std::string& name);

/// True when any change is breaking.
bool has_breaking(const std::vector<ArgumentChange>& changes);

/// One line for the log: "TrainingArguments.logging_steps: 10 in the checkpoint, 20 now (cadence only)".
std::string describe(const ArgumentChange& change);

/// The ConfigError message for the breaking changes, all of them: "TrainingArguments.learning_rate:
/// the checkpoint in DIR was trained with 5e-05, this run has 3e-05; ...; resume with the
/// recorded values or use another output_dir". "" when none is breaking.
std::string breaking_changes_message(const std::vector<ArgumentChange>& changes, const std::string& checkpoint_dir);

}  // namespace tenax::sdk
