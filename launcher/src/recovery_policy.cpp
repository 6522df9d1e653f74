#include "recovery_policy.h"

namespace tenax::launcher {

LossDecision decide_on_loss(const LossFacts& f) {
  LossDecision d;
  if (f.mode != RecoveryMode::kInProcess) return d;
  // A loss while the last one heals is part of that fault event, already charged: so is the
  // restart from disk that it may force.
  d.charged = f.phase != RecoveryPhase::kHealing;
  if (f.config_error) {
    d.why_not = "a worker exited with a usage or configuration error, which a new process would repeat";
  } else if (f.lost >= f.world_size) {
    d.why_not = "no worker survived to heal the others from";
  } else if (f.phase == RecoveryPhase::kHealing) {
    // The same fault event: charged when it began, whatever the budget says now.
    if (f.event_losses + 1 > kMaxLossesPerEvent) {
      d.why_not = std::to_string(f.event_losses + 1) + " losses came before the job healed from the first (at most " +
                  std::to_string(kMaxLossesPerEvent) + " per fault event)";
    } else {
      d.action = LossAction::kReplaceInProcess;
    }
  } else if (f.ready < f.world_size) {
    d.why_not = "only " + std::to_string(f.ready) + " of " + std::to_string(f.world_size) +
                " workers had started training with in-process healing (a loss during start-up, or a program "
                "not built on tenax::sdk::Trainer)";
  } else if (f.restarts_used >= f.max_restarts) {
    d.why_not = "the restart budget is spent (--max-restarts " + std::to_string(f.max_restarts) + ")";
  } else {
    d.action = LossAction::kReplaceInProcess;
  }
  return d;
}

}  // namespace tenax::launcher
