// In-process recovery on one agent as a state machine (issue 33): the phase of the job, the
// fault event in progress and what it was charged, and the one clock (when the warm spares may
// refill). Facts and the time go in (started, lost, formed, may_refill_spares); what to do comes
// out (heal in process or restart from disk, charged or not, and why). RecoveryCoordinator
// gathers the facts (the store's counts, the workers' processes) and acts; this holds no process,
// socket or store, so every phase × fault pair is tested deterministically with a made-up clock:
// tests/launcher/recovery_machine_test.cpp.
//
//   kStarting ──every rank ready──▶ kSteady ──loss, healable──▶ kDeclaring ──formed──▶ kHealing
//       ▲                             ▲                            │  (one node: at once) │
//       │                             └────────every rank ready────┼──────────────────────┘
//       │                                                          │ loss: same event, not charged
//       └──started (from disk)── kRestarting ◀──not healable───────┘
//
// One fault event costs one restart: the loss that opens it in kSteady is charged; a further
// loss before every rank has healed (kDeclaring, kHealing) belongs to it, and so does a restart
// from disk it forces (recovery_policy.h decides each loss). Across nodes each recovery ends the
// generation and the run loop charges it as decided here; on one node the generation goes on,
// and the machine counts the charged events itself.
// Thread-safety: none; the agent's thread owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "recovery_policy.h"
#include "run_options.h"

namespace tenax::launcher {

enum class RecoveryState {
  kStarting,    ///< a generation started from disk; not every rank trains with healing yet
  kSteady,      ///< every rank of the running generation heals in process
  kDeclaring,   ///< a loss is being healed; the next generation is not formed yet (across nodes)
  kHealing,     ///< the generation that heals a loss is declared; not every rank has healed
  kRestarting,  ///< in-process recovery gave up on this generation: it restarts from disk
};

const char* recovery_state_name(RecoveryState state);

/// A loss as the agent sees it: its own workers that ended, and the store's count.
struct Loss {
  int generation = 0;          ///< the generation the loss ended
  int world_size = 1;          ///< of that generation
  int lost = 0;                ///< this node's workers lost together (0: another node's loss)
  int survivors = 1;           ///< this node's workers not lost
  int unhealed_survivors = 0;  ///< of them, replacements that had not healed when last seen
  std::int64_t ready = 0;      ///< ranks that announced in-process healing in `generation`
  bool config_error = false;   ///< a lost worker exited 2
  int restarts = 0;            ///< restarts the run loop has charged so far
};

/// The next generation, formed (across nodes) or about to be declared (one node).
struct Formation {
  int generation = 0;
  int world_size = 1;
  int previous_world_size = 1;
  std::string store_moved_to;    ///< the job's store's new endpoint when the rendezvous host was lost
  bool worker_finished = false;  ///< a worker of this node already finished
  int holders_alive = 1;         ///< this node's workers that hold state and are still running
};

struct RecoveryVerdict {
  bool heal = false;        ///< in process; else every worker restarts from the newest checkpoint
  bool charged = true;      ///< counts against --max-restarts
  bool same_event = false;  ///< the loss came while an earlier one healed
  int event_losses = 0;     ///< losses of the fault event so far, this one included
  std::string why_not;      ///< why not in process (empty when healed, or in restart mode)
};

class RecoveryMachine {
 public:
  using Clock = std::chrono::steady_clock;

  /// `multi_node`: every recovery ends the generation (the rendezvous forms the next).
  RecoveryMachine(RecoveryMode mode, int max_restarts, bool multi_node,
                  Clock::duration spare_refill_delay = std::chrono::seconds(2));

  /// A generation started from disk.
  void started();
  /// `ready` ranks of `generation` announced that they heal in process.
  void ready(int generation, std::int64_t ready, int world_size);
  /// Workers of this node lost (or another node's loss ended the generation).
  RecoveryVerdict lost(const Loss& loss);
  /// The next generation after a healable loss: heal in it, or restart from disk (the event's
  /// charge, not a second one).
  RecoveryVerdict formed(const Formation& formation, Clock::time_point now);
  /// The heal of a formed generation could not begin after all (the job's store could not be
  /// reached): the workers restart from disk, as the fault event's charge, not a second one.
  void heal_abandoned();
  /// Warm spares refill once the last heal had its moment (a new one competes for the cores).
  bool may_refill_spares(Clock::time_point now) const { return now >= refill_after_; }

  RecoveryState state() const { return state_; }
  /// One node: fault events healed in process, charged while the generations went on; the run
  /// loop's restarts plus these are the budget used. (Across nodes: 0, the loop counts them.)
  int charged_events() const { return charged_events_; }
  /// Whether the end of the running generation counts against --max-restarts: as the last loss
  /// was judged (true when none was: a plain failure); resets to true.
  bool take_charge();
  /// Every rank of `generation` healed: the replacements in it hold state like any survivor.
  bool healed_in(int generation) const { return ready_generation_ == generation; }

  const RecoveryMode mode_;
  const int max_restarts_;
  const bool multi_node_;
  const Clock::duration refill_delay_;
  RecoveryState state_ = RecoveryState::kStarting;
  int ready_generation_ = -1;    ///< the last generation of this group in which every rank healed
  int healing_generation_ = -1;  ///< the generation the last heal began in (healed or not)
  int event_losses_ = 0;         ///< losses of the fault event in progress, its first included
  int charged_events_ = 0;
  bool event_charged_here_ = false;  ///< charged_events_ holds an event whose heal has not begun
  bool charge_ = true;
  Clock::time_point refill_after_{};
};

}  // namespace tenax::launcher
