// What the agent does when workers of a running generation are lost (DESIGN.md decision 13),
// as a pure function of what it knows: replace the lost ranks while the others keep their
// processes (in-process recovery), or stop every worker and start the generation again (they
// resume from the newest checkpoint); and whether the loss is charged to --max-restarts. The
// agent's loop only gathers the facts and acts. Tested by table, every phase of the job against
// every kind of loss: tests/launcher/recovery_policy_test.cpp.
//
// One fault event costs one restart (issue 33). A loss in a job that runs healed (kSteady)
// opens an event and is charged; a further loss while the generation that heals it has not
// healed yet (kHealing: forming its communicator, healing, adapting the world) belongs to the
// same event — faults arrive together (a switch port takes two ranks, a node dies during the
// heal) — and is not charged, up to kMaxLossesPerEvent, after which the event is taken for a
// recovery that cannot succeed and the job restarts from disk under restart mode's rules.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "run_options.h"

namespace tenax::launcher {

/// Where the job stands when the loss comes, as the agent sees it.
enum class RecoveryPhase {
  kStarting,  ///< a generation started from disk: not every rank has begun training yet
  kSteady,    ///< every rank of the generation announced that it heals in process
  kHealing,   ///< an in-process recovery declared this generation; not every rank has healed yet
};

/// Losses in one event (the first included) before in-process recovery gives up on it.
inline constexpr int kMaxLossesPerEvent = 4;

struct LossFacts {
  RecoveryMode mode = RecoveryMode::kRestart;
  bool config_error = false;  ///< a lost worker exited 2: a new process would fail the same way
  int world_size = 1;
  int lost = 0;            ///< workers of this generation that died or were found hung
  std::int64_t ready = 0;  ///< workers that announced in-process healing in this generation
  int restarts_used = 0;   ///< restarts and charged fault events so far
  int max_restarts = 0;
  RecoveryPhase phase = RecoveryPhase::kSteady;
  int event_losses = 0;  ///< kHealing: losses of the current event before this one
};

enum class LossAction {
  kReplaceInProcess,   ///< replace the lost ranks; survivors rejoin the next generation
  kRestartGeneration,  ///< stop every worker; the generation restarts (or the job gives up)
};

struct LossDecision {
  LossAction action = LossAction::kRestartGeneration;
  /// Whether the loss counts against --max-restarts (a restart always does; an in-process
  /// recovery only when it opens a fault event).
  bool charged = true;
  /// Why in-process recovery was not used (empty when it is, or when it was not asked for):
  /// the log says which path was taken and why.
  std::string why_not;
};

LossDecision decide_on_loss(const LossFacts& facts);

}  // namespace tenax::launcher
