// Deterministic faults for the demo and the tests, as flags of the example (the C API
// counterpart of tenax/sdk/callbacks/fault_drills.h, which hooks the C++ Trainer's callbacks):
//
//   --fail-at-step S --fail-rank R     rank R SIGKILLs itself after solver step S;
//   --stop-at-step S --stop-rank R     rank R SIGSTOPs itself after solver step S, for a test that
//                                      then kills it from outside by pid (a real kill -9) or
//                                      signals the job while it is frozen;
//   --preempt-at-step S [--preempt-signal USR1|TERM]
//                                      rank 0 sends the signal to its parent (the agent of
//                                      `tenax run`) after step S, as Slurm's warning would.
//
// All fire in the first generation only (TENAX_RESTART_COUNT unset or 0), so a restarted job
// runs through. So that a test knows which checkpoint the resume must use, fail and stop first
// wait (up to a minute) until the last checkpoint before S is committed; when S itself was just
// saved they do not wait, on purpose: that is the kill during an asynchronous save.
// Thread-safety: the solver's thread only.
#pragma once

#include <csignal>
#include <cstdint>
#include <string>

namespace sim {

struct FaultOptions {
  std::int64_t fail_at_step = -1;
  int fail_rank = 0;
  std::int64_t stop_at_step = -1;
  int stop_rank = 0;
  std::int64_t preempt_at_step = -1;
  int preempt_signal = SIGUSR1;
};

class FaultHooks {
 public:
  /// Throws std::invalid_argument when a rank is outside the world.
  FaultHooks(const FaultOptions& options, int rank, int world_size, std::string output_dir, std::int64_t save_every);

  /// Called after solver step `step` is complete (and saved, when it is a save step).
  void after_step(std::int64_t step);

 private:
  void wait_for_last_checkpoint(std::int64_t step) const;

  FaultOptions options_;
  int rank_;
  std::string output_dir_;
  std::int64_t save_every_;
  bool armed_;
};

}  // namespace sim
