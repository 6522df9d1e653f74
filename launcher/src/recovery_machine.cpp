#include "recovery_machine.h"

#include <utility>

#include <fmt/format.h>

namespace tenax::launcher {

const char* recovery_state_name(RecoveryState state) {
  switch (state) {
    case RecoveryState::kStarting: return "starting";
    case RecoveryState::kSteady: return "steady";
    case RecoveryState::kDeclaring: return "declaring";
    case RecoveryState::kHealing: return "healing";
    case RecoveryState::kRestarting: return "restarting";
  }
  return "unknown";
}

RecoveryMachine::RecoveryMachine(RecoveryMode mode, int max_restarts, bool multi_node,
                                 Clock::duration spare_refill_delay)
    : mode_(mode), max_restarts_(max_restarts), multi_node_(multi_node), refill_delay_(spare_refill_delay) {}

void RecoveryMachine::started() {
  state_ = RecoveryState::kStarting;
  ready_generation_ = -1;
  healing_generation_ = -1;
  event_losses_ = 0;
}

void RecoveryMachine::ready(int generation, std::int64_t ready, int world_size) {
  if (ready < world_size) return;
  ready_generation_ = generation;
  state_ = RecoveryState::kSteady;
}

bool RecoveryMachine::take_charge() { return std::exchange(charge_, true); }

RecoveryVerdict RecoveryMachine::lost(const Loss& loss) {
  ready(loss.generation, loss.ready, loss.world_size);
  LossFacts facts;
  facts.mode = mode_;
  facts.config_error = loss.config_error;
  facts.world_size = loss.world_size;
  facts.max_restarts = max_restarts_;
  // What counts against --max-restarts: across nodes every recovery ends a generation, which the
  // run loop charges; on one node the recoveries happen inside it and are counted here.
  facts.restarts_used = multi_node_ ? loss.restarts : loss.restarts + charged_events_;
  // The phase: healed in this generation; or this generation heals an earlier loss and has not
  // healed yet (the fault event goes on: a loss while the last one heals comes before the
  // count is complete); or it started from disk and has not begun training with healing.
  if (ready_generation_ == loss.generation) {
    facts.phase = RecoveryPhase::kSteady;
  } else if (loss.generation == healing_generation_ || ready_generation_ >= 0) {
    facts.phase = RecoveryPhase::kHealing;
    facts.event_losses = event_losses_;
  } else {
    facts.phase = RecoveryPhase::kStarting;
  }
  facts.ready = ready_generation_ >= 0 ? loss.world_size : loss.ready;
  // Who holds state: replacements that have not healed hold none, so when only they are left on
  // the only node, nobody survived. (Across nodes another node's workers may still hold it.)
  const int holders = loss.survivors - (healed_in(loss.generation) ? 0 : loss.unhealed_survivors);
  facts.lost = holders <= 0 && !multi_node_ ? loss.world_size : loss.lost;

  const LossDecision decision = decide_on_loss(facts);
  RecoveryVerdict v;
  v.heal = decision.action == LossAction::kReplaceInProcess;
  v.charged = decision.charged;
  v.why_not = decision.why_not;
  v.same_event = facts.phase == RecoveryPhase::kHealing;
  // One node heals inside the generation, which goes on: its next end is charged as usual, the
  // event through charged_events(). Across nodes the recovery ends the generation, charged as decided.
  charge_ = multi_node_ || !v.heal ? decision.charged : true;
  if (v.same_event) {
    ++event_losses_;
  } else if (v.heal) {
    event_losses_ = 1;
    if (!multi_node_) {
      ++charged_events_;
      event_charged_here_ = true;
    }
  }
  v.event_losses = event_losses_;
  state_ = v.heal ? RecoveryState::kDeclaring : RecoveryState::kRestarting;
  return v;
}

RecoveryVerdict RecoveryMachine::formed(const Formation& f, Clock::time_point now) {
  RecoveryVerdict v;
  v.same_event = true;
  v.event_losses = event_losses_;
  if (f.world_size > f.previous_world_size) {
    v.why_not = fmt::format("the world grows from {} to {} ranks, and new ranks start from a checkpoint",
                            f.previous_world_size, f.world_size);
  } else if (!f.store_moved_to.empty()) {
    v.why_not = fmt::format(
        "the job's store moved to {} (the rendezvous host was lost), and the workers' connections to the old one "
        "went with it",
        f.store_moved_to);
  } else if (f.worker_finished) {
    v.why_not = "a worker of this node already finished";
  } else if (!multi_node_ && f.holders_alive <= 0) {
    // Every worker died before the first could be replaced (seen one poll apart): nobody holds
    // the state. Across nodes another node's workers may.
    v.why_not = "no worker survived to heal the others from";
  }
  if (!v.why_not.empty()) {
    // The restart that follows is this fault event's charge, not a second one: on one node the
    // run loop charges it, so the event counted here is handed back; an event opened earlier
    // was charged then. Across nodes the loop charged the generation's end already.
    v.charged = false;
    if (!multi_node_) {
      if (event_charged_here_) {
        --charged_events_;
        charge_ = true;
      } else {
        charge_ = false;
      }
    }
    event_charged_here_ = false;
    state_ = RecoveryState::kRestarting;
    return v;
  }
  v.heal = true;
  v.charged = false;
  event_charged_here_ = false;
  healing_generation_ = f.generation;
  state_ = RecoveryState::kHealing;
  refill_after_ = now + refill_delay_;
  return v;
}

void RecoveryMachine::heal_abandoned() {
  state_ = RecoveryState::kRestarting;
  // One node: the event is in charged_events_ already. Across nodes the loop charged the
  // generation whose end began it.
  if (!multi_node_) charge_ = false;
}

}  // namespace tenax::launcher
