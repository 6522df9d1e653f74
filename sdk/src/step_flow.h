// What follows an optimizer step: whether the epoch ended, whether this is the run's last step,
// and what the strategies ask for (log, evaluate, save) — transformers' DefaultFlowCallback as a
// pure function of the plan and the step, so the Trainer raises TrainerControl's flags from it
// before the callbacks see them (a callback can lower them again).
#pragma once

#include <cstdint>

#include "run_plan.h"

namespace tenax::sdk::detail {

struct StepFlow {
  bool epoch_end = false;
  bool last_step = false;
  bool log = false;
  bool evaluate = false;
  bool save = false;
};

/// After the step that made `global_step` steps, on global batch `data_step` of the data order.
StepFlow flow_after_step(const RunPlan& plan, std::int64_t logging_steps, std::int64_t save_steps,
                         std::int64_t global_step, std::int64_t data_step);

}  // namespace tenax::sdk::detail
