// What the agent does once a generation has ended (DESIGN.md decisions 7 and 12), as a pure
// function of what it knows: exit with which code, or start the next generation; and what it
// tells the rendezvous on the way out. One table for one node and many; the agent's loop
// (agent.cpp) only logs the messages and acts. Tested by table: tests/launcher/run_decision_test.cpp.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "generation.h"
#include "tenax/core/exit_codes.h"

namespace tenax::launcher {

struct GenerationFacts {
  Outcome outcome = Outcome::kFailed;  ///< how the generation ended on this node
  int signal = 0;                      ///< the signal the agent received (0: none)
  int restarts = 0;                    ///< restarts of the generation so far
  /// Whether this generation's end counts against --max-restarts: false when it ended with a
  /// loss during an in-process heal, part of a fault event already charged (recovery_policy.h).
  bool charged = true;
  /// One node: fault events healed in process inside the generations so far. They count against
  /// --max-restarts like restarts (across nodes each one ends a generation and is in `restarts`).
  int healed_events = 0;
  int max_restarts = 0;     ///< --max-restarts
  int generation = 0;       ///< the generation that ended
  int workers = 1;          ///< workers per node
  bool multi_node = false;  ///< the job has a rendezvous (--nnodes, srun)
  bool slurm = false;       ///< under Slurm: its warning signal means "requeue"
  std::string node_id;      ///< multi-node: this node
};

enum class RunAction {
  kExit,     ///< the agent exits with Decision::exit_code
  kRestart,  ///< the next generation starts (restart Decision::restarts of the budget)
};

/// What the agent tells the rendezvous before it exits (multi-node only).
enum class Farewell {
  kNone,
  kFinish,  ///< FINISHED: the other nodes go on undisturbed; the host waits for them first
  kLeave,   ///< LEAVE: the other nodes see this node go and re-form without it
};

struct LogLine {
  enum class Level { kInfo, kWarn, kError } level = Level::kInfo;
  std::string text;
};

struct Decision {
  RunAction action = RunAction::kExit;
  int exit_code = kExitFailure;
  Outcome outcome = Outcome::kFailed;  ///< the run's outcome as agent.json records it
  int restarts = 0;                    ///< restarts after this decision
  Farewell farewell = Farewell::kNone;
  /// Multi-node: the rendezvous service was lost: find it again before the next generation.
  bool find_service = false;
  std::vector<LogLine> log;  ///< what the agent says, in order
};

Decision decide_after_generation(const GenerationFacts& facts);

}  // namespace tenax::launcher
