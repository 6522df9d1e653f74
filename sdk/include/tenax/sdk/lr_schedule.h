// Learning-rate schedules as pure functions of the optimizer step (DESIGN.md decision 5),
// with the meaning of transformers' get_scheduler: the rate used by optimizer step `s`
// (0-based) is base_lr * multiplier(s). Nothing to checkpoint but the step itself.
// Thread-safety: immutable.
//
//   LrSchedule schedule(LrSchedulerType::kLinear, /*warmup=*/10, /*total=*/100);
//   double lr = base_lr * schedule.multiplier(step);
#pragma once

#include <cstdint>
#include <string>

namespace tenax::sdk {

enum class LrSchedulerType { kLinear, kConstant, kConstantWithWarmup, kCosine };

/// "linear", "constant", "constant_with_warmup", "cosine"; throws ConfigError otherwise.
LrSchedulerType parse_lr_scheduler_type(const std::string& name);
const char* lr_scheduler_type_name(LrSchedulerType type);

class LrSchedule {
 public:
  LrSchedule(LrSchedulerType type, std::int64_t warmup_steps, std::int64_t total_steps);
  /// The multiplier of the base rate at optimizer step `step` (0-based).
  double multiplier(std::int64_t step) const;

 private:
  LrSchedulerType type_;
  std::int64_t warmup_steps_;
  std::int64_t total_steps_;
};

}  // namespace tenax::sdk
