#include "run_plan.h"

#include <cmath>
#include <limits>

#include "tenax/core/error.h"

namespace tenax::sdk::detail {

IntervalStrategy parse_interval_strategy(const std::string& value, const std::string& key) {
  const Choice<IntervalStrategy> choice(value);
  if (!choice.valid()) {
    throw ConfigError("TrainingArguments." + key + ": '" + value + "' is not one of \"no\", \"steps\", \"epoch\"");
  }
  return choice.value();
}

namespace {

// The arguments' strategy; one outside the set (arguments not validated) is refused naming `key`.
IntervalStrategy strategy_of(const Choice<IntervalStrategy>& choice, const std::string& key) {
  return choice.valid() ? choice.value() : parse_interval_strategy(choice.name(), key);
}

SaveStrategy strategy_of(const Choice<SaveStrategy>& choice) {
  if (!choice.valid()) {
    throw ConfigError("TrainingArguments.save_strategy: '" + choice.name() + "' is not one of " + choice.accepted());
  }
  return choice.value();
}

}  // namespace

RunPlan plan_run(const TrainingArguments& args, int world_size, std::optional<std::int64_t> dataset_size,
                 std::optional<std::int64_t> saved_global_batch, const std::string& output_dir) {
  RunPlan plan;
  plan.logging = strategy_of(args.logging_strategy, "logging_strategy");
  plan.eval = strategy_of(args.eval_strategy, "eval_strategy");
  plan.save = strategy_of(args.save_strategy);
  plan.eval_steps = args.resolved_eval_steps();
  plan.has_dataset = dataset_size.has_value();

  // DESIGN.md decision 4: the global batch stays the checkpoint's across elastic resizes;
  // gradient accumulation absorbs the change of world size.
  plan.accumulation_steps = args.gradient_accumulation_steps;
  const std::int64_t per_pass = args.per_device_train_batch_size * world_size;
  if (saved_global_batch && *saved_global_batch != per_pass * plan.accumulation_steps) {
    if (*saved_global_batch % per_pass != 0) {
      throw ConfigError("TrainingArguments.per_device_train_batch_size: the checkpoint under " + output_dir +
                        " was trained with a global batch of " + std::to_string(*saved_global_batch) +
                        " samples, which " + std::to_string(world_size) + " ranks x " +
                        std::to_string(args.per_device_train_batch_size) +
                        " per device cannot divide; choose per_device_train_batch_size so that world size x "
                        "per_device_train_batch_size divides " +
                        std::to_string(*saved_global_batch) + " (gradient_accumulation_steps is then set to keep it)");
    }
    plan.accumulation_changed_from = plan.accumulation_steps;
    plan.accumulation_steps = *saved_global_batch / per_pass;
  }
  plan.global_batch = per_pass * plan.accumulation_steps;

  if (!dataset_size) {
    // The caller supplies every batch: there is no data order, no epoch ever ends, and the run
    // lasts as long as the caller steps. max_steps only sets the schedule's length.
    if (plan.logging == IntervalStrategy::kEpoch || plan.eval == IntervalStrategy::kEpoch ||
        plan.save == SaveStrategy::kEpoch) {
      throw ConfigError(
          "TrainingArguments: an embedded trainer (no training dataset) has no epochs; set "
          "logging_strategy, eval_strategy and save_strategy to \"steps\" or \"no\"");
    }
    // A save by the Trainer's schedule would be named by the optimizer step, among checkpoints
    // the caller names by its own step (a solver step): the newest name would no longer be the
    // newest state, and a resume could restore another time's fields.
    if (plan.save != SaveStrategy::kNo) {
      throw ConfigError("TrainingArguments.save_strategy: '" + args.save_strategy.name() +
                        "': an embedded trainer (no training dataset) saves only when its caller asks, labelled "
                        "with the caller's step (Trainer::save_checkpoint, tenax_checkpoint_save); set "
                        "save_strategy = \"no\"");
    }
    plan.steps_per_epoch = kUnboundedSteps;
    plan.max_steps = args.max_steps > 0 ? args.max_steps : kUnboundedSteps;
    plan.data_step_limit = std::numeric_limits<std::int64_t>::max();
    plan.num_train_epochs = 1;
    return plan;
  }
  // As ResumableSampler: the last incomplete global batch of an epoch is dropped, or is a last,
  // smaller step (dataloader_drop_last = false).
  if (*dataset_size < (args.dataloader_drop_last ? plan.global_batch : 1)) {
    throw ConfigError("the training set has " + std::to_string(*dataset_size) +
                      " samples, fewer than one global batch (" + std::to_string(plan.global_batch) +
                      " = world size x per_device_train_batch_size x gradient_accumulation_steps); with "
                      "dataloader_drop_last = false a smaller one is trained on");
  }
  plan.steps_per_epoch = args.dataloader_drop_last ? *dataset_size / plan.global_batch
                                                   : (*dataset_size + plan.global_batch - 1) / plan.global_batch;
  plan.max_steps = args.max_steps > 0
                       ? args.max_steps
                       : static_cast<std::int64_t>(std::ceil(args.num_train_epochs * plan.steps_per_epoch));
  // With epochs (no max_steps) the run ends after that many epochs of data, also when
  // should_epoch_stop skipped the rest of some; with max_steps, after that many steps.
  plan.data_step_limit = args.max_steps > 0 ? std::numeric_limits<std::int64_t>::max() : plan.max_steps;
  plan.num_train_epochs = (plan.max_steps + plan.steps_per_epoch - 1) / plan.steps_per_epoch;
  return plan;
}

}  // namespace tenax::sdk::detail
