#include "run_decision.h"

#include <csignal>

#include <fmt/format.h>

#include "exit_status.h"
#include "shutdown_signals.h"

namespace tenax::launcher {
namespace {

std::string workers_text(int n) { return fmt::format("{} worker{}", n, n == 1 ? "" : "s"); }
std::string restarts_text(int n) { return fmt::format("{} restart{}", n, n == 1 ? "" : "s"); }

Decision exit_with(int code, Outcome outcome, int restarts, Farewell farewell) {
  Decision d;
  d.action = RunAction::kExit;
  d.exit_code = code;
  d.outcome = outcome;
  d.restarts = restarts;
  d.farewell = farewell;
  return d;
}

void say(Decision& d, LogLine::Level level, std::string text) { d.log.push_back({level, std::move(text)}); }

}  // namespace

Decision decide_after_generation(const GenerationFacts& f) {
  using Level = LogLine::Level;
  const bool multi = f.multi_node;
  const int sig = f.signal;
  switch (f.outcome) {
    case Outcome::kFinished: {
      Decision d = exit_with(kExitDone, Outcome::kFinished, f.restarts, multi ? Farewell::kFinish : Farewell::kNone);
      say(d, Level::kInfo,
          multi ? fmt::format("all {} of node {} finished; telling the rendezvous (the other nodes go on undisturbed)",
                              workers_text(f.workers), f.node_id)
                : fmt::format("all {} finished", workers_text(f.workers)));
      return d;
    }
    case Outcome::kConfigError: {
      Decision d = exit_with(kExitUsage, Outcome::kConfigError, f.restarts, multi ? Farewell::kLeave : Farewell::kNone);
      say(d, Level::kError,
          fmt::format("a worker exited with status {} (usage or configuration error; its message is above): "
                      "restarting cannot fix that, so no restart; {}fix the command line or configuration and "
                      "submit again",
                      kExitUsage, multi ? "leaving the rendezvous (the other nodes will see it); " : ""));
      return d;
    }
    case Outcome::kPreempted: {
      Decision d =
          exit_with(kExitPreempted, Outcome::kPreempted, f.restarts, multi ? Farewell::kFinish : Farewell::kNone);
      if (sig != 0) say(d, Level::kInfo, fmt::format("workers saved their checkpoint after {}", signal_name(sig)));
      say(d, Level::kWarn,
          fmt::format("workers were preempted (exit status {}); exiting {} so that the job can be requeued and "
                      "resume from its checkpoint",
                      kExitPreempted, kExitPreempted));
      return d;
    }
    default: break;
  }
  if (f.outcome == Outcome::kInterrupted || sig != 0) {
    if (multi && f.slurm && sig == SIGUSR1) {
      // Slurm's preemption warning reached workers that could not save (still starting, before
      // their handlers were installed: killed by the signal). The job must still be requeued,
      // not end FAILED: its newest committed checkpoint is where the requeued run resumes.
      Decision d = exit_with(kExitPreempted, Outcome::kPreempted, f.restarts, Farewell::kFinish);
      say(d, Level::kWarn,
          fmt::format("workers did not save a checkpoint at {} (still starting?); the requeued job resumes from the "
                      "newest committed checkpoint",
                      signal_name(SIGUSR1)));
      say(d, Level::kWarn, fmt::format("preempted; exiting {} so that the job is requeued", kExitPreempted));
      return d;
    }
    Decision d = exit_with(exit_code_for_signal(sig), Outcome::kInterrupted, f.restarts,
                           multi ? Farewell::kLeave : Farewell::kNone);
    say(d, Level::kWarn,
        multi ? fmt::format("agent stopped by {} before its workers saved a checkpoint; leaving the rendezvous; "
                            "exiting {}",
                            signal_name(sig), exit_code_for_signal(sig))
              : fmt::format("agent stopped by {}; exiting {}", signal_name(sig), exit_code_for_signal(sig)));
    return d;
  }
  // The budget: restarts, and on one node the fault events healed in process on the way.
  const int used = f.restarts + f.healed_events;
  const std::string used_text =
      restarts_text(used) + (f.healed_events > 0 ? fmt::format(", {} of them healed in process", f.healed_events) : "");
  if (f.charged && used >= f.max_restarts) {
    // Nothing is retried once the budget is spent, not even a lost rendezvous service: the agent
    // leaves at once (a service that is gone is not waited for).
    Decision d = exit_with(kExitFailure, f.outcome, f.restarts, multi ? Farewell::kLeave : Farewell::kNone);
    say(d, Level::kError,
        multi ? fmt::format("restart budget spent ({}); leaving the rendezvous and giving up (raise --max-restarts to "
                            "allow more)",
                            used_text)
              : fmt::format("restart budget spent ({}); giving up (raise --max-restarts to allow more)", used_text));
    return d;
  }
  Decision d;
  d.action = RunAction::kRestart;
  d.outcome = f.outcome;
  d.restarts = f.restarts + (f.charged ? 1 : 0);
  d.find_service = multi && f.outcome == Outcome::kRendezvousLost;
  const int now_used = d.restarts + f.healed_events;
  const std::string count =
      f.charged ? fmt::format("restart {} of {}", now_used, f.max_restarts)
                : fmt::format("the same fault event, not charged: {} of {} restarts used", now_used, f.max_restarts);
  say(d, Level::kWarn,
      multi ? fmt::format("re-joining the rendezvous for generation {} ({})", f.generation + 1, count)
            : fmt::format("restarting all {} as generation {} ({})", workers_text(f.workers), f.generation + 1, count));
  return d;
}

}  // namespace tenax::launcher
