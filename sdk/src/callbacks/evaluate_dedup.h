// Tells the metric writers whether on_evaluate's metrics were already written by on_log.
//
// Trainer::evaluate (like transformers' Trainer) reports its metrics twice: first through
// on_log (with epoch and step added), then through on_evaluate. A writer that records both
// hooks would write every evaluation twice; a hand-written loop may call on_evaluate alone.
// So on_evaluate writes only metrics that the last on_log, at the same step, did not already
// carry with the same values. Private to the SDK. Thread-safety: none (training thread only).
#pragma once

#include <cmath>
#include <cstdint>

#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk::detail {

class EvaluateDedup {
 public:
  /// Remembers the logs that on_log wrote at `state.global_step`.
  void logged(const TrainerState& state, const Logs& logs) {
    step_ = state.global_step;
    last_ = logs;
  }
  /// True when every metric is in the last on_log of this same step with the same value.
  bool already_logged(const TrainerState& state, const Logs& metrics) const {
    if (step_ != state.global_step) return false;
    for (const auto& [key, value] : metrics) {
      const auto it = last_.find(key);
      if (it == last_.end()) return false;
      if (!(it->second == value) && !(std::isnan(it->second) && std::isnan(value))) return false;
    }
    return true;
  }

 private:
  std::int64_t step_ = -1;
  Logs last_;
};

}  // namespace tenax::sdk::detail
