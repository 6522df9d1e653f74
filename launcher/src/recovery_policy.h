// What the agent does when workers of a running generation are lost (DESIGN.md decision 13),
// as a pure function of what it knows: replace the lost ranks while the others keep their
// processes (in-process recovery), or stop every worker and start the generation again (they
// resume from the newest checkpoint). The agent's loop only gathers the facts and acts.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "run_options.h"

namespace tenax::launcher {

struct LossFacts {
  RecoveryMode mode = RecoveryMode::kRestart;
  bool config_error = false;  ///< a lost worker exited 2: a new process would fail the same way
  int world_size = 1;
  int lost = 0;            ///< workers of this generation that died or were found hung
  std::int64_t ready = 0;  ///< workers that announced in-process healing in this generation
  int restarts_used = 0;   ///< restarts and in-process recoveries so far
  int max_restarts = 0;
};

enum class LossAction {
  kReplaceInProcess,   ///< replace the lost ranks; survivors rejoin the next generation
  kRestartGeneration,  ///< stop every worker; the generation restarts (or the job gives up)
};

struct LossDecision {
  LossAction action = LossAction::kRestartGeneration;
  /// Why in-process recovery was not used (empty when it is, or when it was not asked for):
  /// the log says which path was taken and why.
  std::string why_not;
};

LossDecision decide_on_loss(const LossFacts& facts);

}  // namespace tenax::launcher
