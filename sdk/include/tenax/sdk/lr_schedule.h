// Learning-rate schedules as pure functions of the optimizer step (DESIGN.md decision 5),
// equal to transformers' get_scheduler (4.44): linear, cosine, cosine_with_restarts,
// polynomial, constant and constant_with_warmup, with warmup and lr_scheduler_kwargs. The rate
// used by optimizer step `s` (0-based) is base_lr * multiplier(s), computed as transformers'
// LambdaLR does (in double, same operations in the same order), so the rates agree with
// Python's to the last bit (tests/sdk/lr_schedule_test.cpp checks them against goldens from
// tools/goldens/schedule_goldens.py). Nothing to checkpoint but the step itself.
// Thread-safety: immutable.
//
//   LrSchedule schedule(LrScheduleOptions(LrSchedulerType::kCosine, /*warmup=*/10, /*total=*/100)
//                           .base_lr(5e-5).num_cycles(0.5));
//   for (auto& group : optimizer.param_groups()) group.options().set_lr(schedule.lr(step));
#pragma once

#include <cstdint>
#include <string>

#include <torch/arg.h>

#include "tenax/sdk/choice.h"

namespace tenax::sdk {

enum class LrSchedulerType { kLinear, kCosine, kCosineWithRestarts, kPolynomial, kConstant, kConstantWithWarmup };

/// transformers' names, in the enum's order (TrainingArguments::lr_scheduler_type is a Choice).
template <>
struct ChoiceSpellings<LrSchedulerType> {
  static constexpr const char* kNames[] = {"linear",     "cosine",   "cosine_with_restarts",
                                           "polynomial", "constant", "constant_with_warmup"};
};

/// transformers' name ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant",
/// "constant_with_warmup") to the type; throws ConfigError naming `field` and the accepted names.
LrSchedulerType parse_lr_scheduler_type(const std::string& name,
                                        const std::string& field = "TrainingArguments.lr_scheduler_type");
/// The transformers name of `type`.
const char* lr_scheduler_type_name(LrSchedulerType type);

/// What defines a schedule: the type and step counts (required), transformers'
/// lr_scheduler_kwargs and the optimizer's base rate (optional). Validated by LrSchedule.
struct LrScheduleOptions {
  LrScheduleOptions(LrSchedulerType type, std::int64_t num_warmup_steps, std::int64_t num_training_steps)
      : type_(type), num_warmup_steps_(num_warmup_steps), num_training_steps_(num_training_steps) {}

  TORCH_ARG(LrSchedulerType, type);
  /// Steps of linear warmup from 0 (ignored by "constant", as in transformers).
  TORCH_ARG(std::int64_t, num_warmup_steps);
  /// Optimizer steps of the whole run (> 0).
  TORCH_ARG(std::int64_t, num_training_steps);
  /// The optimizer's base rate: lr() = base_lr * multiplier(); polynomial's lr_init.
  TORCH_ARG(double, base_lr) = 1.0;
  /// cosine: waves of the cosine (default 0.5, a half wave to 0); cosine_with_restarts: number
  /// of hard restarts (default 1). < 0 selects the type's default.
  TORCH_ARG(double, num_cycles) = -1.0;
  /// polynomial: the final rate, absolute (not a multiplier); must be below base_lr.
  TORCH_ARG(double, lr_end) = 1e-7;
  /// polynomial: the exponent of the decay (> 0).
  TORCH_ARG(double, power) = 1.0;

 public:
  bool operator==(const LrScheduleOptions& other) const;
  bool operator!=(const LrScheduleOptions& other) const { return !(*this == other); }
};

class LrSchedule {
 public:
  /// Throws ConfigError naming the option (transformers' name) that is invalid.
  explicit LrSchedule(LrScheduleOptions options);
  /// The schedule of `type` with default kwargs and base rate 1 (not for polynomial, whose
  /// lr_end is absolute: use the options).
  LrSchedule(LrSchedulerType type, std::int64_t warmup_steps, std::int64_t total_steps);

  /// The multiplier of the base rate at optimizer step `step` (0-based): transformers' lr_lambda.
  double multiplier(std::int64_t step) const;
  /// The rate at optimizer step `step`: base_lr * multiplier(step), as LambdaLR computes it.
  double lr(std::int64_t step) const { return options_.base_lr() * multiplier(step); }

  const LrScheduleOptions& options() const { return options_; }

 private:
  LrScheduleOptions options_;
};

}  // namespace tenax::sdk
