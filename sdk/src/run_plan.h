// The plan of one training run, decided once at Trainer::begin() from the arguments, the world
// size, the training dataset's size (none when an embedding code supplies the batches) and the
// global batch of the checkpoint being resumed. Pure: no I/O, no communication, so every rule
// (DESIGN.md decision 4, the schedule's length, the epoch arithmetic) is unit-tested directly.
// The strategies arrive parsed (TrainingArguments' Choices): the step loop compares enums.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tenax/sdk/training_arguments.h"

namespace tenax::sdk::detail {

using tenax::sdk::IntervalStrategy;
using tenax::sdk::SaveStrategy;

/// "no", "steps" or "epoch"; ConfigError naming `key` otherwise.
IntervalStrategy parse_interval_strategy(const std::string& value, const std::string& key);

struct RunPlan {
  std::int64_t accumulation_steps = 1;
  std::int64_t global_batch = 0;     ///< world x per_device_train_batch_size x accumulation_steps
  std::int64_t steps_per_epoch = 0;  ///< of the data order; "never ends" without a dataset
  std::int64_t max_steps = 0;        ///< optimizer steps of the run; the schedule's length
  /// The run ends after this many global batches of the data order (epoch runs, where
  /// should_epoch_stop skips data); the int64 maximum when max_steps decides instead.
  std::int64_t data_step_limit = 0;
  std::int64_t num_train_epochs = 0;
  bool has_dataset = true;
  /// Set when an elastic resume changed gradient_accumulation_steps (the caller logs it).
  std::optional<std::int64_t> accumulation_changed_from;
  IntervalStrategy logging = IntervalStrategy::kSteps;
  IntervalStrategy eval = IntervalStrategy::kNo;
  SaveStrategy save = SaveStrategy::kSteps;
  std::int64_t eval_steps = 0;
};

/// Without a dataset and without max_steps the schedule is planned over this many steps: a run
/// that ends when the simulation does (linear decay over it is no decay in practice).
inline constexpr std::int64_t kUnboundedSteps = std::int64_t{1} << 40;

/// Throws ConfigError naming the field when the world cannot keep the checkpoint's global batch
/// (DESIGN.md decision 4) or a dataset-less run asks for epochs.
RunPlan plan_run(const TrainingArguments& args, int world_size, std::optional<std::int64_t> dataset_size,
                 std::optional<std::int64_t> saved_global_batch, const std::string& output_dir);

}  // namespace tenax::sdk::detail
