#include "tenax/sdk/training_arguments.h"

#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

void require(bool ok, const std::string& field, const std::string& why) {
  if (!ok) throw ConfigError("TrainingArguments." + field + ": " + why);
}

void require_valid(const ChoiceBase& choice, const std::string& field) {
  require(choice.valid(), field, "'" + choice.name() + "' is not one of: " + choice.accepted());
}

void require_one_of(const std::string& value, const std::string& field, std::initializer_list<const char*> accepted) {
  std::string list;
  for (const char* a : accepted) {
    if (value == a) return;
    list += list.empty() ? a : std::string(", ") + a;
  }
  throw ConfigError("TrainingArguments." + field + ": '" + value + "' is not one of: " + list);
}

}  // namespace

void TrainingArguments::validate() const {
  require(!output_dir.empty(), "output_dir", "is required (where checkpoints and logs are written)");
  require(max_steps > 0 || num_train_epochs > 0, "max_steps", "set max_steps > 0 or num_train_epochs > 0");
  require(per_device_train_batch_size > 0, "per_device_train_batch_size", "must be >= 1");
  require(per_device_eval_batch_size > 0, "per_device_eval_batch_size", "must be >= 1");
  require(gradient_accumulation_steps > 0, "gradient_accumulation_steps", "must be >= 1");
  require(dataloader_num_workers >= 0, "dataloader_num_workers", "must be >= 0 (0: load in the training loop)");
  require(dataloader_prefetch_factor >= 0, "dataloader_prefetch_factor", "must be >= 0 (0: unset, 2 per thread)");
  require(dataloader_prefetch_factor == 0 || dataloader_num_workers > 0, "dataloader_prefetch_factor",
          "is only for batches loaded ahead: set dataloader_num_workers > 0, or leave it unset");
  require(learning_rate >= 0 && std::isfinite(learning_rate), "learning_rate", "must be >= 0 and finite");
  require(weight_decay >= 0, "weight_decay", "must be >= 0");
  require(adam_beta1 >= 0 && adam_beta1 < 1, "adam_beta1", "must be in [0, 1)");
  require(adam_beta2 >= 0 && adam_beta2 < 1, "adam_beta2", "must be in [0, 1)");
  require(adam_epsilon > 0, "adam_epsilon", "must be > 0");
  require(label_smoothing_factor >= 0 && label_smoothing_factor < 1, "label_smoothing_factor",
          "must be in [0, 1) (0: no smoothing)");
  require(data_seed >= -1, "data_seed", "must be >= 0, or -1 for unset (the data order then follows seed)");
  require(warmup_ratio >= 0 && warmup_ratio <= 1, "warmup_ratio", "must be in [0, 1]");
  require(warmup_steps >= 0, "warmup_steps", "must be >= 0");
  require(!(fp16 && bf16), "fp16",
          "and bf16 are both true; choose one precision (bf16 where the hardware has it: no loss scaling needed)");
  require(gradient_checkpointing_kwargs.use_reentrant, "gradient_checkpointing_kwargs.use_reentrant",
          "false (torch's non-reentrant checkpoint) needs autograd's saved-tensor hooks, which libtorch's C++ API "
          "does not offer; true (transformers' default) recomputes each layer in a backward of its own");
  require(logging_steps > 0, "logging_steps", "must be >= 1");
  require_valid(logging_strategy, "logging_strategy");
  require_valid(eval_strategy, "eval_strategy");
  require_valid(save_strategy, "save_strategy");
  require(eval_steps >= 0, "eval_steps", "must be >= 0 (0: logging_steps)");
  if (lr_scheduler_type == LrSchedulerType::kPolynomial) {  // the only schedule that uses it; transformers' rule
    require(lr_scheduler_kwargs.lr_end >= 0 && lr_scheduler_kwargs.lr_end < learning_rate, "lr_scheduler_kwargs.lr_end",
            "must be in [0, learning_rate) for the polynomial schedule");
  }
  require(lr_scheduler_kwargs.power > 0, "lr_scheduler_kwargs.power", "must be > 0");
  for (const std::string& r : report_to) require_one_of(r, "report_to", {"none", "jsonl", "tensorboard"});
  if (load_best_model_at_end) {
    require(!metric_for_best_model.empty(), "metric_for_best_model",
            "load_best_model_at_end needs it (e.g. \"eval_loss\" or \"eval_accuracy\")");
    require(eval_strategy != IntervalStrategy::kNo, "eval_strategy",
            "load_best_model_at_end needs evaluations (\"steps\" or \"epoch\")");
    // "best" saves at the evaluations that matter, so it needs no match (as in transformers).
    require(save_strategy == SaveStrategy::kBest || save_strategy.name() == eval_strategy.name(), "save_strategy",
            "load_best_model_at_end needs save_strategy == eval_strategy ('" + save_strategy.name() + "' vs '" +
                eval_strategy.name() + "'), so that every evaluation has its checkpoint, or save_strategy = \"best\"");
    if (save_strategy == SaveStrategy::kSteps) {
      require(save_steps > 0 && save_steps % resolved_eval_steps() == 0, "save_steps",
              "load_best_model_at_end needs save_steps to be a multiple of eval_steps (" +
                  std::to_string(resolved_eval_steps()) + ")");
    }
  }
  if (save_strategy == SaveStrategy::kBest) {
    require(!metric_for_best_model.empty(), "metric_for_best_model",
            "save_strategy = \"best\" needs it: a checkpoint is saved after each evaluation that improves it (e.g. "
            "\"eval_loss\" or \"eval_accuracy\")");
    require(eval_strategy != IntervalStrategy::kNo, "eval_strategy",
            "save_strategy = \"best\" saves after evaluations that improve metric_for_best_model; with "
            "eval_strategy = \"no\" there are none (set \"steps\" or \"epoch\")");
  }
  require(save_steps >= 0, "save_steps", "must be >= 0 (0 disables periodic saves)");
  require(ddp_bucket_cap_mb >= 1 && ddp_bucket_cap_mb <= 4096, "ddp_bucket_cap_mb",
          "must be between 1 and 4096 (MiB; 25 is DDP's default)");
  require(save_total_limit >= 0, "save_total_limit", "must be >= 0 (0 keeps every checkpoint)");
  require_valid(on_save_error, "on_save_error");
  require_valid(lr_scheduler_type, "lr_scheduler_type");
  require_valid(optim, "optim");
  require(optim != OptimizerName::kAdafactor || learning_rate > 0, "learning_rate",
          "must be > 0 with optim = \"adafactor\" (the Trainer's Adafactor takes its rate from the schedule)");
}

std::int64_t TrainingArguments::resolved_warmup_steps(std::int64_t total_steps) const {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<std::int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

bool TrainingArguments::resolved_greater_is_better() const {
  if (greater_is_better) return *greater_is_better;
  // transformers' TrainingArguments.__post_init__: not metric_for_best_model.endswith("loss").
  const std::string suffix = "loss";
  const std::string& m = metric_for_best_model;
  return !(m.size() >= suffix.size() && m.compare(m.size() - suffix.size(), suffix.size(), suffix) == 0);
}

nlohmann::json TrainingArguments::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for_each_field(*this, [&](const char* name, const auto& value) {
    using Field = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<Field, std::optional<bool>>) {
      out[name] = resolved_greater_is_better();  // the one optional field
    } else if constexpr (std::is_base_of_v<ChoiceBase, Field>) {
      out[name] = value.name();
    } else {
      out[name] = value;
    }
  });
  return out;
}

}  // namespace tenax::sdk
