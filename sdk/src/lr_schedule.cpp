#include "tenax/sdk/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

std::string number(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

void require(bool ok, const LrScheduleOptions& o, const std::string& what) {
  if (!ok) throw ConfigError(std::string("LrSchedule (") + lr_scheduler_type_name(o.type()) + "): " + what);
}

// transformers' warmup: float(current_step) / float(max(1, num_warmup_steps)).
double warmup_multiplier(std::int64_t step, std::int64_t warmup) {
  return static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, warmup));
}

// transformers' progress after warmup: float(step - warmup) / float(max(1, total - warmup)).
double progress(std::int64_t step, std::int64_t warmup, std::int64_t total) {
  return static_cast<double>(step - warmup) / static_cast<double>(std::max<std::int64_t>(1, total - warmup));
}

}  // namespace

LrSchedulerType parse_lr_scheduler_type(const std::string& name, const std::string& field) {
  const Choice<LrSchedulerType> choice(name);
  if (!choice.valid()) throw ConfigError(field + ": '" + name + "' is not one of: " + choice.accepted());
  return choice.value();
}

const char* lr_scheduler_type_name(LrSchedulerType type) {
  return ChoiceSpellings<LrSchedulerType>::kNames[static_cast<int>(type)];
}

bool LrScheduleOptions::operator==(const LrScheduleOptions& other) const {
  return type_ == other.type_ && num_warmup_steps_ == other.num_warmup_steps_ &&
         num_training_steps_ == other.num_training_steps_ && base_lr_ == other.base_lr_ &&
         num_cycles_ == other.num_cycles_ && lr_end_ == other.lr_end_ && power_ == other.power_;
}

LrSchedule::LrSchedule(LrScheduleOptions options) : options_(std::move(options)) {
  const LrScheduleOptions& o = options_;
  require(o.num_warmup_steps() >= 0, o, "warmup_steps must be >= 0, got " + std::to_string(o.num_warmup_steps()));
  require(o.num_training_steps() > 0, o,
          "the number of training steps must be positive, got " + std::to_string(o.num_training_steps()));
  require(std::isfinite(o.base_lr()) && o.base_lr() >= 0, o,
          "the base learning rate must be >= 0 and finite, got " + number(o.base_lr()));
  require(std::isfinite(o.num_cycles()), o, "lr_scheduler_kwargs.num_cycles must be finite");
  if (o.type() == LrSchedulerType::kPolynomial) {
    // transformers raises ValueError for lr_end >= lr_init: the decay would not go down.
    require(std::isfinite(o.lr_end()) && o.lr_end() >= 0, o,
            "lr_scheduler_kwargs.lr_end must be >= 0 and finite, got " + number(o.lr_end()));
    require(o.lr_end() < o.base_lr(), o,
            "lr_scheduler_kwargs.lr_end (" + number(o.lr_end()) + ") must be smaller than the base learning rate (" +
                number(o.base_lr()) + "); it is an absolute rate, not a multiplier");
    require(std::isfinite(o.power()) && o.power() > 0, o,
            "lr_scheduler_kwargs.power must be > 0, got " + number(o.power()));
  }
}

LrSchedule::LrSchedule(LrSchedulerType type, std::int64_t warmup_steps, std::int64_t total_steps)
    : LrSchedule(LrScheduleOptions(type, warmup_steps, total_steps)) {}

// The lr_lambda functions of transformers.optimization, operation for operation (Python's
// floats are doubles; math.cos and ** are the C library's cos and pow).
double LrSchedule::multiplier(std::int64_t step) const {
  const LrScheduleOptions& o = options_;
  const std::int64_t warmup = o.num_warmup_steps();
  const std::int64_t total = o.num_training_steps();
  if (o.type() == LrSchedulerType::kConstant) return 1.0;  // no warmup, as get_scheduler
  if (step < warmup) return warmup_multiplier(step, warmup);
  switch (o.type()) {
    case LrSchedulerType::kConstantWithWarmup: return 1.0;
    case LrSchedulerType::kLinear:
      return std::max(
          0.0, static_cast<double>(total - step) / static_cast<double>(std::max<std::int64_t>(1, total - warmup)));
    case LrSchedulerType::kCosine: {
      const double cycles = o.num_cycles() < 0 ? 0.5 : o.num_cycles();
      return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * cycles * 2.0 * progress(step, warmup, total))));
    }
    case LrSchedulerType::kCosineWithRestarts: {
      const double cycles = o.num_cycles() < 0 ? 1.0 : o.num_cycles();
      const double p = progress(step, warmup, total);
      if (p >= 1.0) return 0.0;
      // Python's % on floats: fmod shifted to the divisor's sign (both are >= 0 here).
      double phase = std::fmod(cycles * p, 1.0);
      if (phase < 0) phase += 1.0;
      return std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * phase)));
    }
    case LrSchedulerType::kPolynomial: {
      const double lr_init = o.base_lr();
      const double lr_end = o.lr_end();
      // transformers divides by zero at step == total == warmup; the end rate is what it means.
      if (step > total || total == warmup) return lr_end / lr_init;
      const double lr_range = lr_init - lr_end;
      const double decay_steps = static_cast<double>(total - warmup);
      const double pct_remaining = 1 - static_cast<double>(step - warmup) / decay_steps;
      const double decay = lr_range * std::pow(pct_remaining, o.power()) + lr_end;
      return decay / lr_init;
    }
    case LrSchedulerType::kConstant: break;
  }
  return 1.0;
}

}  // namespace tenax::sdk
