// The agent's decision on a lost worker (launcher/src/recovery_policy.h), and the flags that ask
// for in-process recovery.
#include "recovery_policy.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_options.h"
#include "tenax/core/error.h"
#include "tenax/elastic/in_process_recovery.h"

namespace tenax::launcher {
namespace {

LossFacts ready_job() {
  LossFacts f;
  f.mode = RecoveryMode::kInProcess;
  f.world_size = 3;
  f.lost = 1;
  f.ready = 3;
  f.restarts_used = 0;
  f.max_restarts = 3;
  return f;
}

TEST(LauncherRecoveryPolicy, ALossInAReadyJobIsHealedInProcess) {
  const LossDecision d = decide_on_loss(ready_job());
  EXPECT_EQ(d.action, LossAction::kReplaceInProcess);
  EXPECT_TRUE(d.why_not.empty());
}

TEST(LauncherRecoveryPolicy, RestartModeRestartsWithoutExplaining) {
  LossFacts f = ready_job();
  f.mode = RecoveryMode::kRestart;
  const LossDecision d = decide_on_loss(f);
  EXPECT_EQ(d.action, LossAction::kRestartGeneration);
  EXPECT_TRUE(d.why_not.empty());
}

TEST(LauncherRecoveryPolicy, EveryReasonToFallBackToTheDiskPathIsNamed) {
  struct Case {
    void (*change)(LossFacts&);
    const char* says;
  };
  const std::vector<Case> cases = {
      {[](LossFacts& f) { f.config_error = true; }, "configuration error"},
      {[](LossFacts& f) { f.lost = 3; }, "no worker survived"},
      {[](LossFacts& f) { f.ready = 2; }, "only 2 of 3 workers"},
      {[](LossFacts& f) { f.restarts_used = 3; }, "restart budget is spent"},
  };
  for (const Case& c : cases) {
    LossFacts f = ready_job();
    c.change(f);
    const LossDecision d = decide_on_loss(f);
    EXPECT_EQ(d.action, LossAction::kRestartGeneration) << c.says;
    EXPECT_NE(d.why_not.find(c.says), std::string::npos) << d.why_not;
  }
}

// Issue 33: every phase of the job against every kind of loss. A loss while the generation that
// heals the last one forms or heals is the same fault event: healed in process, not charged
// again, until kMaxLossesPerEvent; a fallback to disk it forces is not charged either.
TEST(LauncherRecoveryPolicy, EveryPhaseAgainstEveryKindOfLoss) {
  enum class Loss { kOneWorker, kEveryHolder, kConfigError, kWithBudgetSpent, kOneTooMany };
  struct Case {
    RecoveryPhase phase;
    Loss loss;
    LossAction action;
    bool charged;
    const char* says;  // in why_not ("" when healed in process)
  };
  using A = LossAction;
  using P = RecoveryPhase;
  const std::vector<Case> cases = {
      {P::kStarting, Loss::kOneWorker, A::kRestartGeneration, true, "only 1 of 3 workers"},
      {P::kStarting, Loss::kEveryHolder, A::kRestartGeneration, true, "no worker survived"},
      {P::kStarting, Loss::kConfigError, A::kRestartGeneration, true, "configuration error"},
      {P::kStarting, Loss::kWithBudgetSpent, A::kRestartGeneration, true, "only 1 of 3 workers"},
      {P::kStarting, Loss::kOneTooMany, A::kRestartGeneration, true, "only 1 of 3 workers"},
      {P::kSteady, Loss::kOneWorker, A::kReplaceInProcess, true, ""},
      {P::kSteady, Loss::kEveryHolder, A::kRestartGeneration, true, "no worker survived"},
      {P::kSteady, Loss::kConfigError, A::kRestartGeneration, true, "configuration error"},
      {P::kSteady, Loss::kWithBudgetSpent, A::kRestartGeneration, true, "restart budget is spent"},
      {P::kSteady, Loss::kOneTooMany, A::kReplaceInProcess, true, ""},
      {P::kHealing, Loss::kOneWorker, A::kReplaceInProcess, false, ""},
      {P::kHealing, Loss::kEveryHolder, A::kRestartGeneration, false, "no worker survived"},
      {P::kHealing, Loss::kConfigError, A::kRestartGeneration, false, "configuration error"},
      {P::kHealing, Loss::kWithBudgetSpent, A::kReplaceInProcess, false, ""},
      {P::kHealing, Loss::kOneTooMany, A::kRestartGeneration, false, "losses came before the job healed"},
  };
  for (const Case& c : cases) {
    LossFacts f = ready_job();
    f.phase = c.phase;
    if (c.phase == P::kStarting) f.ready = 1;
    if (c.phase == P::kHealing) f.event_losses = 1;
    switch (c.loss) {
      case Loss::kOneWorker: break;
      case Loss::kEveryHolder: f.lost = 3; break;
      case Loss::kConfigError: f.config_error = true; break;
      case Loss::kWithBudgetSpent: f.restarts_used = f.max_restarts; break;
      case Loss::kOneTooMany: f.event_losses = kMaxLossesPerEvent; break;
    }
    const LossDecision d = decide_on_loss(f);
    const std::string name =
        "phase " + std::to_string(static_cast<int>(c.phase)) + ", loss " + std::to_string(static_cast<int>(c.loss));
    EXPECT_EQ(d.action, c.action) << name << ": " << d.why_not;
    EXPECT_EQ(d.charged, c.charged) << name;
    if (*c.says == '\0') {
      EXPECT_TRUE(d.why_not.empty()) << name << ": " << d.why_not;
    } else {
      EXPECT_NE(d.why_not.find(c.says), std::string::npos) << name << ": " << d.why_not;
    }
  }
}

TEST(LauncherRecoveryPolicy, RecoveryAndSparesFlags) {
  const RunOptions defaults = parse_run_options(std::vector<std::string>{"--nproc-per-node", "2", "--", "app"});
  EXPECT_EQ(defaults.recovery, RecoveryMode::kRestart);
  EXPECT_EQ(defaults.spares, kDefaultSpares);
  const RunOptions o = parse_run_options(
      std::vector<std::string>{"--nproc-per-node", "2", "--recovery", "in-process", "--spares=0", "--", "app"});
  EXPECT_EQ(o.recovery, RecoveryMode::kInProcess);
  EXPECT_EQ(o.spares, 0);
  try {
    parse_run_options(std::vector<std::string>{"--nproc-per-node", "2", "--recovery", "inprocess", "--", "app"});
    FAIL() << "an unknown mode must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--recovery expects in-process or restart, got 'inprocess'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_run_options(std::vector<std::string>{"--nproc-per-node", "2", "--spares", "-1", "--", "app"}),
               ConfigError);
}

TEST(LauncherRecoveryPolicy, NodeLayoutsRoundTripAndBadOnesAreRefused) {
  const elastic::NodeLayout a{3, 6};
  const auto back = elastic::parse_node_layout(elastic::format_node_layout(a));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->rank_offset, 3);
  EXPECT_EQ(back->world_size, 6);
  // A rank offset at or beyond the world names no rank of it.
  for (const char* bad : {"", "3", "3 6 1", "-1 6", "6 6", "0 0", "x 6"}) {
    EXPECT_FALSE(elastic::parse_node_layout(bad)) << bad;
  }
  EXPECT_EQ(elastic::layout_key(7, "node-000001"), "recovery/layout/7/node-000001");
  EXPECT_NE(elastic::spare_key("node-000000", 0), elastic::spare_key("node-000001", 0))
      << "two nodes' spares with the same id must not share an assignment";
}

TEST(LauncherRecoveryPolicy, SpareAssignmentsRoundTripAndBadOnesAreRefused) {
  const elastic::SpareAssignment a{2, 5, 1};
  const auto back = elastic::parse_spare_assignment(elastic::format_spare_assignment(a));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->local_rank, 2);
  EXPECT_EQ(back->generation, 5);
  EXPECT_EQ(back->restart_count, 1);
  for (const char* bad : {"", "2", "2 5", "2 5 1 9", "-1 5 1", "2 x 1", "2 5 -1"}) {
    EXPECT_FALSE(elastic::parse_spare_assignment(bad)) << bad;
  }
}

}  // namespace
}  // namespace tenax::launcher
