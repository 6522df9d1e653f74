// In-process recovery as a state machine (launcher/src/recovery_machine.h, issue 33): every
// state of the job against every kind of fault, on one node and across nodes, with a made-up
// clock and no process, socket or sleep. The real processes' side of the same classes:
// tests/integration/overlapping_faults_test.cpp, hang_culprit_test.cpp, in_process_recovery_test.cpp.
#include "recovery_machine.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tenax::launcher {
namespace {

using Clock = RecoveryMachine::Clock;
using namespace std::chrono_literals;

constexpr int kWorld = 4;
constexpr int kMaxRestarts = 3;

// One node runs all four ranks; across nodes this node runs two of them.
int node_workers(bool multi_node) { return multi_node ? 2 : kWorld; }

Loss loss_of(bool multi_node, int generation, int lost) {
  Loss l;
  l.generation = generation;
  l.world_size = kWorld;
  l.lost = lost;
  l.survivors = node_workers(multi_node) - lost;
  l.ready = 0;
  return l;
}

Formation formation_after(int generation) {
  Formation f;
  f.generation = generation + 1;
  f.world_size = kWorld;
  f.previous_world_size = kWorld;
  f.holders_alive = 1;
  return f;
}

// The machine brought into `state` the way a job gets there; generation 0 started from disk.
// Returns the generation that runs in that state.
int enter(RecoveryMachine& m, RecoveryState state, bool multi_node, Clock::time_point now) {
  m.started();
  if (state == RecoveryState::kStarting) return 0;
  m.ready(0, kWorld, kWorld);
  if (state == RecoveryState::kSteady) return 0;
  EXPECT_TRUE(m.lost(loss_of(multi_node, 0, 1)).heal);
  if (state == RecoveryState::kDeclaring) return 0;
  EXPECT_TRUE(m.formed(formation_after(0), now).heal);
  EXPECT_EQ(m.state(), RecoveryState::kHealing);
  return 1;
}

enum class Fault {
  kOneWorker,    // one of this node's workers dies or hangs
  kTwoTogether,  // two of them at once (gathered into one loss)
  kEveryHolder,  // every worker of this node (unhealed replacements alone: a test of its own)
  kConfigError,  // a worker exits 2
  kAnotherNode,  // another node's loss ends the generation (nothing lost here)
  kBudgetSpent,  // one worker, with --max-restarts used up by the run loop
  kOneTooMany,   // one worker, a loss beyond kMaxLossesPerEvent before the job healed
};

const char* fault_name(Fault f) {
  switch (f) {
    case Fault::kOneWorker: return "one worker";
    case Fault::kTwoTogether: return "two together";
    case Fault::kEveryHolder: return "every holder";
    case Fault::kConfigError: return "config error";
    case Fault::kAnotherNode: return "another node";
    case Fault::kBudgetSpent: return "budget spent";
    case Fault::kOneTooMany: return "one too many";
  }
  return "?";
}

Loss fault_loss(Fault f, bool multi_node, int generation, RecoveryMachine& m) {
  Loss l = loss_of(multi_node, generation, 1);
  switch (f) {
    case Fault::kOneWorker: break;
    case Fault::kTwoTogether: l = loss_of(multi_node, generation, 2); break;
    case Fault::kEveryHolder: l = loss_of(multi_node, generation, node_workers(multi_node)); break;
    case Fault::kConfigError: l.config_error = true; break;
    case Fault::kAnotherNode: l = loss_of(multi_node, generation, 0); break;
    case Fault::kBudgetSpent: l.restarts = kMaxRestarts; break;
    case Fault::kOneTooMany:
      // The event's first loss made the state; the rest of its allowance first.
      for (int i = 1; i < kMaxLossesPerEvent; ++i) {
        EXPECT_TRUE(m.lost(loss_of(multi_node, generation, 1)).heal) << i;
        EXPECT_TRUE(m.formed(formation_after(generation), Clock::time_point{}).heal);
        ++generation;
      }
      l = loss_of(multi_node, generation, 1);
      break;
  }
  return l;
}

struct LossRow {
  bool multi_node;
  RecoveryState state;
  Fault fault;
  bool heal;
  bool charged;       // the verdict's
  bool loop_charges;  // take_charge(): whether the generation's end counts against the budget
  int events;         // charged_events() after
  const char* says;   // in why_not ("" when healed)
};

// Every state a loss can find the job in (a loss in kDeclaring is found when the next generation
// forms: see the formation table) against every kind of loss.
TEST(LauncherRecoveryMachine, EveryStateAgainstEveryKindOfLoss) {
  using S = RecoveryState;
  using F = Fault;
  const bool one = false;
  const bool many = true;
  const std::vector<LossRow> rows = {
      // One node: recoveries happen inside the generation; the machine counts the events.
      {one, S::kStarting, F::kOneWorker, false, true, true, 0, "only 0 of 4 workers"},
      {one, S::kStarting, F::kTwoTogether, false, true, true, 0, "only 0 of 4 workers"},
      {one, S::kStarting, F::kEveryHolder, false, true, true, 0, "no worker survived"},
      {one, S::kStarting, F::kConfigError, false, true, true, 0, "configuration error"},
      {one, S::kStarting, F::kBudgetSpent, false, true, true, 0, "only 0 of 4 workers"},
      {one, S::kSteady, F::kOneWorker, true, true, true, 1, ""},
      {one, S::kSteady, F::kTwoTogether, true, true, true, 1, ""},
      {one, S::kSteady, F::kEveryHolder, false, true, true, 0, "no worker survived"},
      {one, S::kSteady, F::kConfigError, false, true, true, 0, "configuration error"},
      {one, S::kSteady, F::kBudgetSpent, false, true, true, 0, "restart budget is spent"},
      {one, S::kHealing, F::kOneWorker, true, false, true, 1, ""},
      {one, S::kHealing, F::kTwoTogether, true, false, true, 1, ""},
      {one, S::kHealing, F::kEveryHolder, false, false, false, 1, "no worker survived"},
      {one, S::kHealing, F::kConfigError, false, false, false, 1, "configuration error"},
      {one, S::kHealing, F::kBudgetSpent, true, false, true, 1, ""},
      {one, S::kHealing, F::kOneTooMany, false, false, false, 1,
       "5 losses came before the job healed from the first (at most 4"},
      // Across nodes: every recovery ends the generation, which the run loop charges as decided
      // (and counts: the machine's own count stays 0).
      {many, S::kStarting, F::kOneWorker, false, true, true, 0, "only 0 of 4 workers"},
      {many, S::kStarting, F::kAnotherNode, false, true, true, 0, "only 0 of 4 workers"},
      {many, S::kStarting, F::kConfigError, false, true, true, 0, "configuration error"},
      {many, S::kSteady, F::kOneWorker, true, true, true, 0, ""},
      {many, S::kSteady, F::kTwoTogether, true, true, true, 0, ""},
      {many, S::kSteady, F::kEveryHolder, true, true, true, 0, ""},  // another node holds state
      {many, S::kSteady, F::kAnotherNode, true, true, true, 0, ""},
      {many, S::kSteady, F::kConfigError, false, true, true, 0, "configuration error"},
      {many, S::kSteady, F::kBudgetSpent, false, true, true, 0, "restart budget is spent"},
      {many, S::kHealing, F::kOneWorker, true, false, false, 0, ""},
      {many, S::kHealing, F::kTwoTogether, true, false, false, 0, ""},
      {many, S::kHealing, F::kEveryHolder, true, false, false, 0, ""},
      {many, S::kHealing, F::kAnotherNode, true, false, false, 0, ""},
      {many, S::kHealing, F::kConfigError, false, false, false, 0, "configuration error"},
      {many, S::kHealing, F::kBudgetSpent, true, false, false, 0, ""},
      {many, S::kHealing, F::kOneTooMany, false, false, false, 0,
       "5 losses came before the job healed from the first (at most 4"},
  };
  for (const LossRow& r : rows) {
    SCOPED_TRACE(std::string(r.multi_node ? "many nodes, " : "one node, ") + recovery_state_name(r.state) + " × " +
                 fault_name(r.fault));
    RecoveryMachine m(RecoveryMode::kInProcess, kMaxRestarts, r.multi_node);
    const int generation = enter(m, r.state, r.multi_node, Clock::time_point{});
    const Loss loss = fault_loss(r.fault, r.multi_node, generation, m);
    const RecoveryVerdict v = m.lost(loss);
    EXPECT_EQ(v.heal, r.heal) << v.why_not;
    EXPECT_EQ(v.charged, r.charged);
    EXPECT_EQ(v.same_event, r.state == S::kHealing);
    EXPECT_NE(v.why_not.find(r.says), std::string::npos) << v.why_not;
    EXPECT_EQ(v.why_not.empty(), r.heal) << v.why_not;
    EXPECT_EQ(m.charged_events(), r.events);
    EXPECT_EQ(m.state(), r.heal ? S::kDeclaring : S::kRestarting);
    EXPECT_EQ(m.take_charge(), r.loop_charges);
    EXPECT_TRUE(m.take_charge()) << "a plain failure after it is charged";
  }
}

enum class Formed { kAsPlanned, kWorldGrows, kStoreMoved, kWorkerFinished, kNoHolderAlive };

struct FormRow {
  bool multi_node;
  bool same_event;  // the loss being healed came while an earlier one healed
  Formed formed;
  bool heal;
  bool loop_charges;
  int events;
  const char* says;
};

// What the next generation may bring while a loss is declared (kDeclaring): the heal goes on, or
// the workers restart from disk, and that restart is the fault event's charge, never a second.
TEST(LauncherRecoveryMachine, EveryWayTheNextGenerationFormsWhileALossIsDeclared) {
  const bool one = false;
  const bool many = true;
  const std::vector<FormRow> rows = {
      {one, false, Formed::kAsPlanned, true, true, 1, ""},
      {one, false, Formed::kWorldGrows, false, true, 0, "the world grows from 4 to 5 ranks"},
      {one, false, Formed::kStoreMoved, false, true, 0, "store moved to 10.0.0.2:29500"},
      {one, false, Formed::kWorkerFinished, false, true, 0, "already finished"},
      {one, false, Formed::kNoHolderAlive, false, true, 0, "no worker survived"},
      {one, true, Formed::kAsPlanned, true, true, 1, ""},
      {one, true, Formed::kNoHolderAlive, false, false, 1, "no worker survived"},
      {one, true, Formed::kStoreMoved, false, false, 1, "store moved"},
      {many, false, Formed::kAsPlanned, true, true, 0, ""},
      {many, false, Formed::kWorldGrows, false, true, 0, "the world grows"},
      {many, false, Formed::kStoreMoved, false, true, 0, "store moved"},
      {many, false, Formed::kWorkerFinished, false, true, 0, "already finished"},
      {many, false, Formed::kNoHolderAlive, true, true, 0, ""},  // another node's workers hold state
      {many, true, Formed::kAsPlanned, true, false, 0, ""},
      {many, true, Formed::kStoreMoved, false, false, 0, "store moved"},
  };
  for (const FormRow& r : rows) {
    SCOPED_TRACE(std::string(r.multi_node ? "many nodes" : "one node") + (r.same_event ? ", same event, " : ", ") +
                 "formed " + std::to_string(static_cast<int>(r.formed)));
    RecoveryMachine m(RecoveryMode::kInProcess, kMaxRestarts, r.multi_node);
    int generation =
        enter(m, r.same_event ? RecoveryState::kHealing : RecoveryState::kDeclaring, r.multi_node, Clock::time_point{});
    if (r.same_event) {
      ASSERT_TRUE(m.lost(loss_of(r.multi_node, generation, 1)).heal);
      // Across nodes the generation that ended is charged as the loss was judged: not again.
      EXPECT_EQ(m.take_charge(), !r.multi_node);
    } else if (r.multi_node) {
      EXPECT_TRUE(m.take_charge()) << "the loss that opens an event is charged";
    }
    Formation f = formation_after(generation);
    switch (r.formed) {
      case Formed::kAsPlanned: break;
      case Formed::kWorldGrows: f.world_size = kWorld + 1; break;
      case Formed::kStoreMoved: f.store_moved_to = "10.0.0.2:29500"; break;
      case Formed::kWorkerFinished: f.worker_finished = true; break;
      case Formed::kNoHolderAlive: f.holders_alive = 0; break;
    }
    const RecoveryVerdict v = m.formed(f, Clock::time_point{});
    EXPECT_EQ(v.heal, r.heal) << v.why_not;
    EXPECT_FALSE(v.charged) << "the event was charged when its first loss was judged";
    EXPECT_NE(v.why_not.find(r.says), std::string::npos) << v.why_not;
    EXPECT_EQ(m.state(), r.heal ? RecoveryState::kHealing : RecoveryState::kRestarting);
    EXPECT_EQ(m.charged_events(), r.events);
    // On one node a restart from disk ends the generation: charged once for the whole event.
    if (!r.multi_node) {
      EXPECT_EQ(m.take_charge(), r.loop_charges);
    }
  }
}

// A heal that cannot begin after the generation formed (the job's store unreachable) restarts
// from disk as the fault event's charge: on one node the event is counted already, so the
// generation's end is not charged again; across nodes the loop charged it when it ended.
TEST(LauncherRecoveryMachine, AHealThatCannotBeginCostsNoSecondCharge) {
  for (const bool multi_node : {false, true}) {
    SCOPED_TRACE(multi_node ? "many nodes" : "one node");
    RecoveryMachine m(RecoveryMode::kInProcess, kMaxRestarts, multi_node);
    enter(m, RecoveryState::kDeclaring, multi_node, Clock::time_point{});
    // Across nodes the generation that the loss ended was charged by the run loop then.
    if (multi_node) {
      EXPECT_TRUE(m.take_charge());
    }
    ASSERT_TRUE(m.formed(formation_after(0), Clock::time_point{}).heal);
    m.heal_abandoned();
    EXPECT_EQ(m.state(), RecoveryState::kRestarting);
    EXPECT_EQ(m.charged_events(), multi_node ? 0 : 1);
    if (!multi_node) {
      EXPECT_FALSE(m.take_charge()) << "the event's restart from disk is not charged again";
    }
  }
}

// One fault event, however many losses it has, costs one charge; the next loss after every rank
// healed opens a new event; a restart from disk starts over.
TEST(LauncherRecoveryMachine, OneFaultEventIsOneChargeHoweverManyLossesItHas) {
  RecoveryMachine m(RecoveryMode::kInProcess, kMaxRestarts, /*multi_node=*/false);
  const Clock::time_point t0{};
  enter(m, RecoveryState::kSteady, false, t0);
  int g = 0;
  for (int loss = 0; loss < kMaxLossesPerEvent; ++loss, ++g) {
    const RecoveryVerdict v = m.lost(loss_of(false, g, 1));
    ASSERT_TRUE(v.heal) << loss << ": " << v.why_not;
    EXPECT_EQ(v.event_losses, loss + 1);
    ASSERT_TRUE(m.formed(formation_after(g), t0).heal);
  }
  EXPECT_EQ(m.charged_events(), 1);
  m.ready(g, kWorld, kWorld);
  EXPECT_EQ(m.state(), RecoveryState::kSteady);
  EXPECT_TRUE(m.healed_in(g));
  const RecoveryVerdict next = m.lost(loss_of(false, g, 1));
  EXPECT_TRUE(next.heal);
  EXPECT_TRUE(next.charged);
  EXPECT_FALSE(next.same_event);
  EXPECT_EQ(m.charged_events(), 2);
  // The budget used is the loop's restarts plus the events: two events and one restart from disk
  // spend --max-restarts 3, and the next event restarts from disk (charged, under restart mode's rules).
  ASSERT_TRUE(m.formed(formation_after(g), t0).heal);
  m.ready(g + 1, kWorld, kWorld);
  Loss third = loss_of(false, g + 1, 1);
  third.restarts = 1;
  const RecoveryVerdict spent = m.lost(third);
  EXPECT_FALSE(spent.heal);
  EXPECT_TRUE(spent.charged);
  EXPECT_NE(spent.why_not.find("--max-restarts 3"), std::string::npos) << spent.why_not;
  m.started();
  EXPECT_EQ(m.state(), RecoveryState::kStarting);
  EXPECT_FALSE(m.healed_in(g + 1));
}

// A replacement that healed holds state like any survivor; one that has not, holds none.
TEST(LauncherRecoveryMachine, AReplacementHoldsStateOnceItsGenerationHealed) {
  RecoveryMachine m(RecoveryMode::kInProcess, kMaxRestarts, /*multi_node=*/false);
  enter(m, RecoveryState::kHealing, false, Clock::time_point{});
  Loss only_replacements_left = loss_of(false, 1, 1);
  only_replacements_left.unhealed_survivors = only_replacements_left.survivors;
  Loss after_heal = only_replacements_left;
  after_heal.ready = kWorld;  // the store says every rank of generation 1 healed
  EXPECT_TRUE(m.lost(after_heal).heal);
  RecoveryMachine before(RecoveryMode::kInProcess, kMaxRestarts, false);
  enter(before, RecoveryState::kHealing, false, Clock::time_point{});
  EXPECT_FALSE(before.lost(only_replacements_left).heal);
}

// The one clock: a heal holds the warm spares' refill back for the delay, so that a new spare
// (it loads libtorch) does not compete with the heal for the node's cores.
TEST(LauncherRecoveryMachine, WarmSparesRefillOnlyAfterTheHealHadItsMoment) {
  RecoveryMachine m(RecoveryMode::kInProcess, kMaxRestarts, /*multi_node=*/false, 2s);
  const Clock::time_point t0 = Clock::time_point{} + 100s;
  EXPECT_TRUE(m.may_refill_spares(t0)) << "no heal yet";
  enter(m, RecoveryState::kHealing, false, t0);
  EXPECT_FALSE(m.may_refill_spares(t0));
  EXPECT_FALSE(m.may_refill_spares(t0 + 1999ms));
  EXPECT_TRUE(m.may_refill_spares(t0 + 2s));
  // A restart from disk is not a heal: it does not hold the refill back.
  EXPECT_FALSE(m.lost(fault_loss(Fault::kEveryHolder, false, 1, m)).heal);
  EXPECT_TRUE(m.may_refill_spares(t0 + 2s));
}

TEST(LauncherRecoveryMachine, RestartModeNeverHealsAndChargesEveryLoss) {
  for (const bool multi_node : {false, true}) {
    RecoveryMachine m(RecoveryMode::kRestart, kMaxRestarts, multi_node);
    enter(m, RecoveryState::kStarting, multi_node, Clock::time_point{});
    m.ready(0, kWorld, kWorld);
    const RecoveryVerdict v = m.lost(loss_of(multi_node, 0, 1));
    EXPECT_FALSE(v.heal);
    EXPECT_TRUE(v.charged);
    EXPECT_TRUE(v.why_not.empty()) << "restart mode is not a fallback: nothing to explain";
    EXPECT_TRUE(m.take_charge());
  }
}

}  // namespace
}  // namespace tenax::launcher
