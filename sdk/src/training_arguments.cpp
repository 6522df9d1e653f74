#include "tenax/sdk/training_arguments.h"

#include <cmath>

#include "tenax/core/error.h"
#include "tenax/sdk/lr_schedule.h"

namespace tenax::sdk {
namespace {

void require(bool ok, const std::string& field, const std::string& why) {
  if (!ok) throw ConfigError("TrainingArguments." + field + ": " + why);
}

}  // namespace

void TrainingArguments::validate() const {
  require(!output_dir.empty(), "output_dir", "is required (where checkpoints and logs are written)");
  require(max_steps > 0 || num_train_epochs > 0, "max_steps",
          "set max_steps > 0 or num_train_epochs > 0");
  require(per_device_train_batch_size > 0, "per_device_train_batch_size", "must be >= 1");
  require(per_device_eval_batch_size > 0, "per_device_eval_batch_size", "must be >= 1");
  require(gradient_accumulation_steps > 0, "gradient_accumulation_steps", "must be >= 1");
  require(learning_rate >= 0 && std::isfinite(learning_rate), "learning_rate", "must be >= 0 and finite");
  require(weight_decay >= 0, "weight_decay", "must be >= 0");
  require(adam_beta1 >= 0 && adam_beta1 < 1, "adam_beta1", "must be in [0, 1)");
  require(adam_beta2 >= 0 && adam_beta2 < 1, "adam_beta2", "must be in [0, 1)");
  require(adam_epsilon > 0, "adam_epsilon", "must be > 0");
  require(warmup_ratio >= 0 && warmup_ratio <= 1, "warmup_ratio", "must be in [0, 1]");
  require(warmup_steps >= 0, "warmup_steps", "must be >= 0");
  require(logging_steps > 0, "logging_steps", "must be >= 1");
  require(save_steps >= 0, "save_steps", "must be >= 0 (0 disables periodic saves)");
  require(save_total_limit >= 0, "save_total_limit", "must be >= 0 (0 keeps every checkpoint)");
  require(on_save_error == "continue" || on_save_error == "stop", "on_save_error",
          "'" + on_save_error + "' is not one of: continue, stop");
  parse_lr_scheduler_type(lr_scheduler_type);  // throws ConfigError naming the field
}

std::int64_t TrainingArguments::resolved_warmup_steps(std::int64_t total_steps) const {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<std::int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

nlohmann::json TrainingArguments::to_json() const {
  return {{"output_dir", output_dir},
          {"num_train_epochs", num_train_epochs},
          {"max_steps", max_steps},
          {"per_device_train_batch_size", per_device_train_batch_size},
          {"per_device_eval_batch_size", per_device_eval_batch_size},
          {"gradient_accumulation_steps", gradient_accumulation_steps},
          {"learning_rate", learning_rate},
          {"weight_decay", weight_decay},
          {"adam_beta1", adam_beta1},
          {"adam_beta2", adam_beta2},
          {"adam_epsilon", adam_epsilon},
          {"max_grad_norm", max_grad_norm},
          {"lr_scheduler_type", lr_scheduler_type},
          {"warmup_ratio", warmup_ratio},
          {"warmup_steps", warmup_steps},
          {"logging_steps", logging_steps},
          {"save_steps", save_steps},
          {"save_total_limit", save_total_limit},
          {"metric_for_best_model", metric_for_best_model},
          {"greater_is_better", greater_is_better},
          {"save_async", save_async},
          {"on_save_error", on_save_error},
          {"handle_preemption_signals", handle_preemption_signals},
          {"seed", seed}};
}

}  // namespace tenax::sdk
