#include "argument_changes.h"

#include <algorithm>
#include <cstdint>

namespace tenax::sdk {
namespace {

struct Rule {
  const char* name;
  ArgumentChangeKind kind;
  const char* reason;
};

constexpr ArgumentChangeKind kBreaking = ArgumentChangeKind::kBreaking;
constexpr ArgumentChangeKind kHarmless = ArgumentChangeKind::kHarmless;

// Every TrainingArguments field (a test checks that none is missing). The header says why.
constexpr Rule kRules[] = {
    {"output_dir", kHarmless, "where files go"},
    {"num_train_epochs", kBreaking, "it fixes the length of the schedule"},
    {"max_steps", kBreaking, "it fixes the length of the schedule"},
    {"per_device_train_batch_size", kHarmless, "the global batch stays the checkpoint's"},
    {"per_device_eval_batch_size", kHarmless, "evaluation batching only"},
    {"gradient_accumulation_steps", kHarmless, "the global batch stays the checkpoint's"},
    {"learning_rate", kBreaking, "it changes every update"},
    {"weight_decay", kBreaking, "it changes every update"},
    {"adam_beta1", kBreaking, "it changes every update"},
    {"adam_beta2", kBreaking, "it changes every update"},
    {"adam_epsilon", kBreaking, "it changes every update"},
    {"max_grad_norm", kBreaking, "it changes every update"},
    {"label_smoothing_factor", kBreaking, "it changes every loss"},
    {"lr_scheduler_type", kBreaking, "it changes the schedule"},
    {"lr_scheduler_kwargs.num_cycles", kBreaking, "it changes the schedule"},
    {"lr_scheduler_kwargs.lr_end", kBreaking, "it changes the schedule"},
    {"lr_scheduler_kwargs.power", kBreaking, "it changes the schedule"},
    {"warmup_ratio", kBreaking, "it changes the schedule"},
    {"warmup_steps", kBreaking, "it changes the schedule"},
    {"logging_strategy", kHarmless, "logging cadence only"},
    {"logging_steps", kHarmless, "logging cadence only"},
    {"eval_strategy", kHarmless, "evaluation cadence only"},
    {"eval_steps", kHarmless, "evaluation cadence only"},
    {"save_strategy", kHarmless, "checkpoint cadence only"},
    {"save_steps", kHarmless, "checkpoint cadence only"},
    {"save_total_limit", kHarmless, "checkpoint retention only"},
    {"metric_for_best_model", kBreaking, "the recorded best checkpoint was chosen by the old metric"},
    {"greater_is_better", kBreaking, "the recorded best checkpoint was chosen the other way round"},
    {"eval_on_start", kHarmless, "an evaluation before the first step only"},
    {"load_best_model_at_end", kHarmless, "what happens after the last step only"},
    {"use_cpu", kHarmless, "which device computes: the state moves with the run"},
    {"bf16", kBreaking, "it changes the arithmetic of every step"},
    {"fp16", kBreaking, "it changes the arithmetic of every step"},
    {"save_only_model", kHarmless, "what later checkpoints hold, not how a step computes"},
    {"ignore_data_skip", kHarmless, "where a resume starts its data, a choice of the resume"},
    {"gradient_checkpointing", kHarmless, "memory only: the gradients are the same"},
    {"gradient_checkpointing_kwargs.use_reentrant", kHarmless, "memory only: the gradients are the same"},
    {"optim", kBreaking, "the checkpoint's optimizer state is another optimizer's"},
    {"dataloader_drop_last", kBreaking, "it changes the steps per epoch, so where the data position stands"},
    {"group_by_length", kBreaking, "it changes the data order"},
    {"dataloader_num_workers", kHarmless, "how batches are loaded, not what they hold"},
    {"dataloader_prefetch_factor", kHarmless, "how batches are loaded, not what they hold"},
    {"include_num_input_tokens_seen", kHarmless, "a count only (it goes on from what the checkpoint recorded)"},
    {"full_determinism", kBreaking, "it changes the arithmetic of every step"},
    {"disable_tqdm", kHarmless, "display only"},
    {"report_to", kHarmless, "where metrics go"},
    {"logging_dir", kHarmless, "where metrics go"},
    {"save_async", kHarmless, "how checkpoints are written"},
    {"on_save_error", kHarmless, "failure policy of later saves"},
    {"resume_from_checkpoint", kHarmless, "which checkpoint a run starts from, not how it trains"},
    {"restore_callback_states_from_checkpoint", kHarmless, "what this resume restores, not what a step computes"},
    {"handle_preemption_signals", kHarmless, "signal handling only"},
    {"ddp_bucket_cap_mb", kHarmless, "the summation order of the gradient allreduce only, as a new world size"},
    {"ddp_overlap_backward", kHarmless, "when the gradient allreduce runs, not what it computes"},
    {"seed", kBreaking, "it changes the data order and the random streams"},
    {"data_seed", kBreaking, "it changes the data order"},
};

const Rule* find_rule(const std::string& name) {
  for (const Rule& r : kRules) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

// `key` > 0 in the record and in this run: the field it overrides is unused by both.
bool positive_in_both(const nlohmann::json& recorded, const nlohmann::json& current, const char* key) {
  const auto positive = [&](const nlohmann::json& j) {
    return j.is_object() && j.contains(key) && j[key].is_number() && j[key].get<double>() > 0;
  };
  return positive(recorded) && positive(current);
}

bool is_adamw(const nlohmann::json& optim) { return optim == "adamw_torch" || optim == "adamw_torch_fused"; }

std::string shown(const nlohmann::json& value) { return value.is_null() ? "(not recorded)" : value.dump(); }

}  // namespace

std::optional<ArgumentChangeKind> argument_change_kind(const std::string& name) {
  const Rule* rule = find_rule(name);
  return rule == nullptr ? std::nullopt : std::optional<ArgumentChangeKind>(rule->kind);
}

std::vector<ArgumentChange> diff_arguments(const nlohmann::json& recorded, const TrainingArguments& current) {
  std::vector<ArgumentChange> changes;
  if (!recorded.is_object() || recorded.empty()) return changes;
  const nlohmann::json now = current.to_json();
  // In for_each_field order (json objects iterate sorted).
  for_each_field(current, [&](const char* name, const auto&) {
    const nlohmann::json& value = now.at(name);
    if (!recorded.contains(name)) {
      changes.push_back({name, nullptr, value, kHarmless, "the checkpoint did not record it (an older build)"});
      return;
    }
    const nlohmann::json& before = recorded.at(name);
    if (before == value) return;
    const Rule* rule = find_rule(name);
    ArgumentChange change{name, before, value, rule != nullptr ? rule->kind : kBreaking,
                          rule != nullptr ? rule->reason : "not classified: assumed to change the run"};
    const std::string n = name;
    if (n == "num_train_epochs" && positive_in_both(recorded, now, "max_steps")) {
      change.kind = kHarmless;
      change.reason = "unused: max_steps > 0 in both runs";
    } else if (n == "warmup_ratio" && positive_in_both(recorded, now, "warmup_steps")) {
      change.kind = kHarmless;
      change.reason = "unused: warmup_steps > 0 in both runs";
    } else if (n == "optim" && is_adamw(before) && is_adamw(value)) {
      change.kind = kHarmless;
      change.reason = "the same AdamW by two names";
    }
    changes.push_back(std::move(change));
  });
  for (const auto& [key, value] : recorded.items()) {
    if (!now.contains(key)) {
      changes.push_back(
          {key, value, nullptr, kHarmless, "this build has no such field (a newer or older build wrote it)"});
    }
  }
  return changes;
}

bool has_breaking(const std::vector<ArgumentChange>& changes) {
  return std::any_of(changes.begin(), changes.end(),
                     [](const ArgumentChange& c) { return c.kind == ArgumentChangeKind::kBreaking; });
}

std::string describe(const ArgumentChange& change) {
  return "TrainingArguments." + change.name + ": " + shown(change.recorded) + " in the checkpoint, " +
         (change.current.is_null() ? std::string("unknown to this build") : change.current.dump() + " now") + " (" +
         change.reason + ")";
}

std::string breaking_changes_message(const std::vector<ArgumentChange>& changes, const std::string& checkpoint_dir) {
  std::string message;
  for (const ArgumentChange& c : changes) {
    if (c.kind != ArgumentChangeKind::kBreaking) continue;
    message += "TrainingArguments." + c.name + ": the checkpoint in " + checkpoint_dir + " was trained with " +
               shown(c.recorded) + ", this run has " + shown(c.current) + " (" + c.reason + "); ";
  }
  if (message.empty()) return message;
  return message + "resume with the recorded values or use another output_dir";
}

}  // namespace tenax::sdk
