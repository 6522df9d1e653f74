#include "step_flow.h"

namespace tenax::sdk::detail {

StepFlow flow_after_step(const RunPlan& plan, std::int64_t logging_steps, std::int64_t save_steps,
                         std::int64_t global_step, std::int64_t data_step) {
  StepFlow flow;
  flow.epoch_end = plan.has_dataset && (data_step + 1) % plan.steps_per_epoch == 0;
  flow.last_step = plan.has_dataset && (global_step == plan.max_steps || data_step + 1 >= plan.data_step_limit);
  flow.log = (plan.logging == IntervalStrategy::kSteps && (global_step % logging_steps == 0 || flow.last_step)) ||
             (plan.logging == IntervalStrategy::kEpoch && (flow.epoch_end || flow.last_step));
  flow.evaluate = (plan.eval == IntervalStrategy::kSteps && global_step % plan.eval_steps == 0) ||
                  (plan.eval == IntervalStrategy::kEpoch && flow.epoch_end);
  flow.save = (plan.save == SaveStrategy::kSteps && save_steps > 0 && global_step % save_steps == 0) ||
              (plan.save == SaveStrategy::kEpoch && flow.epoch_end);
  return flow;
}

}  // namespace tenax::sdk::detail
