// Dynamic loss scaling for float16 training (TrainingArguments::fp16), torch.amp.GradScaler's
// algorithm: the loss is multiplied by `scale` before backward so that small gradients survive
// float16; the gradients are divided by it again (after the allreduce, before clipping); a step
// whose gradients hold an inf or a nan is skipped and the scale multiplied by backoff_factor;
// after growth_interval steps in a row without one it is multiplied by growth_factor.
//
// As in transformers, a skipped step advances global_step but neither the optimizer nor the
// learning-rate schedule: the schedule runs `skipped_steps` behind. The state travels in the
// TrainerState (checkpoint, resume, in-process heal), so that a resumed run is bit-identical.
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

namespace tenax::sdk {

/// torch.amp.GradScaler's arguments, with its defaults (those transformers and Accelerate use).
struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

struct LossScaleState {
  double scale = 65536.0;
  /// Steps in a row with finite gradients since the scale last changed (GradScaler's _growth_tracker).
  std::int64_t growth_tracker = 0;
  /// Optimizer steps skipped for inf/nan gradients since the run began.
  std::int64_t skipped_steps = 0;

  nlohmann::json to_json() const;
  /// Throws StorageError when `json` is not to_json()'s.
  static LossScaleState from_json(const nlohmann::json& json);
  bool operator==(const LossScaleState& o) const {
    return scale == o.scale && growth_tracker == o.growth_tracker && skipped_steps == o.skipped_steps;
  }
};

}  // namespace tenax::sdk
