#include "tenax/sdk/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "tenax/core/error.h"

namespace tenax::sdk {

LrSchedulerType parse_lr_scheduler_type(const std::string& name) {
  if (name == "linear") return LrSchedulerType::kLinear;
  if (name == "constant") return LrSchedulerType::kConstant;
  if (name == "constant_with_warmup") return LrSchedulerType::kConstantWithWarmup;
  if (name == "cosine") return LrSchedulerType::kCosine;
  throw ConfigError("lr_scheduler_type='" + name +
                    "' is not known; use linear, cosine, constant or constant_with_warmup");
}

const char* lr_scheduler_type_name(LrSchedulerType type) {
  switch (type) {
    case LrSchedulerType::kLinear: return "linear";
    case LrSchedulerType::kConstant: return "constant";
    case LrSchedulerType::kConstantWithWarmup: return "constant_with_warmup";
    case LrSchedulerType::kCosine: return "cosine";
  }
  return "?";
}

LrSchedule::LrSchedule(LrSchedulerType type, std::int64_t warmup_steps, std::int64_t total_steps)
    : type_(type), warmup_steps_(warmup_steps), total_steps_(total_steps) {
  if (warmup_steps < 0) throw ConfigError("warmup_steps must be >= 0");
  if (total_steps <= 0) throw ConfigError("the number of training steps must be positive");
}

// Formulas of transformers.optimization (get_linear_schedule_with_warmup, ...), in double.
double LrSchedule::multiplier(std::int64_t step) const {
  const double s = static_cast<double>(step);
  const double w = static_cast<double>(warmup_steps_);
  const double t = static_cast<double>(total_steps_);
  if (type_ == LrSchedulerType::kConstant) return 1.0;
  if (step < warmup_steps_) return s / std::max(1.0, w);
  switch (type_) {
    case LrSchedulerType::kConstantWithWarmup:
      return 1.0;
    case LrSchedulerType::kLinear:
      return std::max(0.0, (t - s) / std::max(1.0, t - w));
    case LrSchedulerType::kCosine: {
      const double progress = (s - w) / std::max(1.0, t - w);
      return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * 0.5 * 2.0 * progress)));
    }
    case LrSchedulerType::kConstant:
      break;
  }
  return 1.0;
}

}  // namespace tenax::sdk
