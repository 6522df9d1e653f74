// The agent's decision after a generation (launcher/src/run_decision.h), by table: every outcome,
// with and without a signal, on one node and many, with budget left and spent.
#include "run_decision.h"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

namespace tenax::launcher {
namespace {

GenerationFacts facts(Outcome outcome, bool multi, int signal = 0, int restarts = 0) {
  GenerationFacts f;
  f.outcome = outcome;
  f.signal = signal;
  f.restarts = restarts;
  f.max_restarts = 2;
  f.generation = 4;
  f.workers = 2;
  f.multi_node = multi;
  f.node_id = "node-000001";
  return f;
}

std::string all_lines(const Decision& d) {
  std::string out;
  for (const LogLine& l : d.log) out += l.text + "\n";
  return out;
}

TEST(LauncherRunDecision, EveryOutcomeOnOneNodeAndMany) {
  struct Case {
    const char* name;
    GenerationFacts in;
    RunAction action;
    int exit_code;
    Outcome outcome;
    Farewell farewell;
    const char* says;
  };
  const std::vector<Case> cases = {
      {"finished, one node", facts(Outcome::kFinished, false), RunAction::kExit, 0, Outcome::kFinished, Farewell::kNone,
       "all 2 workers finished"},
      {"finished, nodes", facts(Outcome::kFinished, true), RunAction::kExit, 0, Outcome::kFinished, Farewell::kFinish,
       "all 2 workers of node node-000001 finished; telling the rendezvous"},
      {"config error, one node", facts(Outcome::kConfigError, false), RunAction::kExit, 2, Outcome::kConfigError,
       Farewell::kNone, "restarting cannot fix that, so no restart; fix the command line"},
      {"config error, nodes", facts(Outcome::kConfigError, true), RunAction::kExit, 2, Outcome::kConfigError,
       Farewell::kLeave, "leaving the rendezvous (the other nodes will see it)"},
      {"preempted after a signal", facts(Outcome::kPreempted, false, SIGTERM), RunAction::kExit, 3, Outcome::kPreempted,
       Farewell::kNone, "workers saved their checkpoint after SIGTERM"},
      {"preempted, nodes", facts(Outcome::kPreempted, true), RunAction::kExit, 3, Outcome::kPreempted,
       Farewell::kFinish, "exiting 3 so that the job can be requeued"},
      {"interrupted, one node", facts(Outcome::kInterrupted, false, SIGINT), RunAction::kExit, 130,
       Outcome::kInterrupted, Farewell::kNone, "agent stopped by SIGINT; exiting 130"},
      {"a signal during a failure counts as an interruption", facts(Outcome::kFailed, false, SIGTERM), RunAction::kExit,
       143, Outcome::kInterrupted, Farewell::kNone, "agent stopped by SIGTERM"},
      {"interrupted, nodes", facts(Outcome::kInterrupted, true, SIGTERM), RunAction::kExit, 143, Outcome::kInterrupted,
       Farewell::kLeave, "before its workers saved a checkpoint; leaving the rendezvous"},
      {"failed, budget left, one node", facts(Outcome::kFailed, false, 0, 1), RunAction::kRestart, 1, Outcome::kFailed,
       Farewell::kNone, "restarting all 2 workers as generation 5 (restart 2 of 2)"},
      {"failed, budget left, nodes", facts(Outcome::kFailed, true), RunAction::kRestart, 1, Outcome::kFailed,
       Farewell::kNone, "re-joining the rendezvous for generation 5 (restart 1 of 2)"},
      {"restarted by the rendezvous", facts(Outcome::kRendezvousRestart, true), RunAction::kRestart, 1,
       Outcome::kRendezvousRestart, Farewell::kNone, "re-joining the rendezvous"},
      {"failed, budget spent, one node", facts(Outcome::kFailed, false, 0, 2), RunAction::kExit, 1, Outcome::kFailed,
       Farewell::kNone, "restart budget spent (2 restarts); giving up"},
      {"failed, budget spent, nodes", facts(Outcome::kFailed, true, 0, 2), RunAction::kExit, 1, Outcome::kFailed,
       Farewell::kLeave, "leaving the rendezvous and giving up (raise --max-restarts"},
      {"service lost, budget spent: no search for it", facts(Outcome::kRendezvousLost, true, 0, 2), RunAction::kExit, 1,
       Outcome::kRendezvousLost, Farewell::kLeave, "restart budget spent"},
  };
  for (const Case& c : cases) {
    const Decision d = decide_after_generation(c.in);
    EXPECT_EQ(d.action, c.action) << c.name;
    if (c.action == RunAction::kExit) {
      EXPECT_EQ(d.exit_code, c.exit_code) << c.name;
    }
    EXPECT_EQ(d.outcome, c.outcome) << c.name;
    EXPECT_EQ(d.farewell, c.farewell) << c.name;
    EXPECT_NE(all_lines(d).find(c.says), std::string::npos) << c.name << ": " << all_lines(d);
    EXPECT_FALSE(d.find_service) << c.name;
  }
}

TEST(LauncherRunDecision, SlurmsWarningBeforeAnySaveStillRequeues) {
  GenerationFacts f = facts(Outcome::kInterrupted, true, SIGUSR1);
  f.slurm = true;
  const Decision d = decide_after_generation(f);
  EXPECT_EQ(d.exit_code, 3);
  EXPECT_EQ(d.outcome, Outcome::kPreempted);
  EXPECT_EQ(d.farewell, Farewell::kFinish);
  EXPECT_NE(all_lines(d).find("did not save a checkpoint at SIGUSR1"), std::string::npos) << all_lines(d);
  // Outside Slurm the same signal is an interruption.
  f.slurm = false;
  EXPECT_EQ(decide_after_generation(f).outcome, Outcome::kInterrupted);
}

TEST(LauncherRunDecision, ALostServiceIsFoundAgainOnlyWhileRestartsRemain) {
  const Decision d = decide_after_generation(facts(Outcome::kRendezvousLost, true, 0, 1));
  EXPECT_EQ(d.action, RunAction::kRestart);
  EXPECT_TRUE(d.find_service);
  EXPECT_EQ(d.restarts, 2);
}

TEST(LauncherRunDecision, ARestartCountsOneAgainstTheBudget) {
  for (int used = 0; used < 2; ++used) {
    const Decision d = decide_after_generation(facts(Outcome::kFailed, false, 0, used));
    EXPECT_EQ(d.action, RunAction::kRestart);
    EXPECT_EQ(d.restarts, used + 1);
  }
  EXPECT_EQ(decide_after_generation(facts(Outcome::kFailed, false, 0, 2)).action, RunAction::kExit);
}

// Issue 33: a generation that ended with a loss during an in-process heal belongs to a fault
// event already charged: the next one starts even with the budget spent, and costs nothing.
TEST(LauncherRunDecision, AnUnchargedEndRestartsWithoutSpendingTheBudget) {
  for (bool multi : {false, true}) {
    GenerationFacts f = facts(multi ? Outcome::kRendezvousRestart : Outcome::kFailed, multi, 0, 2);
    f.charged = false;
    const Decision d = decide_after_generation(f);
    EXPECT_EQ(d.action, RunAction::kRestart) << all_lines(d);
    EXPECT_EQ(d.restarts, 2);
    EXPECT_NE(all_lines(d).find("the same fault event, not charged: 2 of 2 restarts used"), std::string::npos)
        << all_lines(d);
  }
}

// Issue 33: on one node a fault event healed in process costs one restart of the budget as it
// does across nodes (where it ends a generation): the loop's restarts plus the healed events.
// Before, one node allowed --max-restarts healed events and then --max-restarts restarts more.
TEST(LauncherRunDecision, FaultEventsHealedInProcessOnOneNodeCountAgainstTheBudget) {
  GenerationFacts f = facts(Outcome::kFailed, false, 0, 0);  // --max-restarts 2, no restart yet
  f.healed_events = 2;
  const Decision spent = decide_after_generation(f);
  EXPECT_EQ(spent.action, RunAction::kExit) << all_lines(spent);
  EXPECT_EQ(spent.exit_code, 1);
  EXPECT_NE(all_lines(spent).find("restart budget spent (2 restarts, 2 of them healed in process); giving up"),
            std::string::npos)
      << all_lines(spent);
  f.healed_events = 1;
  const Decision left = decide_after_generation(f);
  EXPECT_EQ(left.action, RunAction::kRestart) << all_lines(left);
  EXPECT_EQ(left.restarts, 1) << "restarts from disk, as agent.json reports them";
  EXPECT_NE(all_lines(left).find("(restart 2 of 2)"), std::string::npos) << all_lines(left);
}

}  // namespace
}  // namespace tenax::launcher
