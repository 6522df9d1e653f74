#include "step_recovery.h"

#include <optional>

#include "tenax/sdk/recovered_error.h"

namespace tenax::capi {

void recover_through(tenax_trainer* trainer, const std::string& why) {
  if (trainer == nullptr || !trainer->recovers_steps || !trainer->begun || trainer->begin_failed) return;
  const std::optional<std::int64_t> step = trainer->trainer->recover(why);
  if (!step) return;
  throw RecoveredError("a peer was lost (" + why +
                           ") and the job healed in process: this call did not complete; every rank stands at "
                           "optimizer step " +
                           std::to_string(*step) +
                           " with its registered arrays as they were at that tenax_train_step; go on from there",
                       *step);
}

}  // namespace tenax::capi
