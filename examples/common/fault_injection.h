// Failure and preemption injection for the example jobs (the demo and the integration tests
// use them to kill or preempt a real run). Callbacks, header-only, shared by the examples so
// that `--fail-at-step/--fail-rank` and `--preempt-at-step/--preempt-signal` mean the same
// thing in each.
// Thread-safety: called from the training thread only, as every TrainerCallback.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>

#include "tenax/core/logging.h"
#include "tenax/sdk/trainer_callback.h"

namespace tenax::examples {

/// Kills this process with SIGKILL after step `step` on rank `rank`, first generation only
/// (restart_count 0), so the restarted job runs through.
class FailureInjection final : public sdk::TrainerCallback {
 public:
  FailureInjection(std::int64_t step, int rank, std::int64_t restart_count)
      : step_(step), rank_(rank), armed_(restart_count == 0) {}
  void on_step_end(const sdk::TrainingArguments&, sdk::TrainerState& state, sdk::TrainerControl&) override {
    if (armed_ && state.global_step == step_ && state.rank == rank_) {
      logger("example")->warn("failure injection: rank {} kills itself with SIGKILL after step {}", rank_, step_);
      std::raise(SIGKILL);
    }
  }

 private:
  std::int64_t step_;
  int rank_;
  bool armed_;
};

/// Sends `signal` to the agent (this worker's parent) after step `step`, from rank 0 — the way
/// Slurm's warning signal or scancel reaches a job — so that the preemption path can be tested.
class PreemptionInjection final : public sdk::TrainerCallback {
 public:
  PreemptionInjection(std::int64_t step, int signal) : step_(step), signal_(signal) {}
  void on_step_end(const sdk::TrainingArguments&, sdk::TrainerState& state, sdk::TrainerControl&) override {
    if (!sent_ && state.global_step == step_ && state.rank == 0) {
      logger("example")->warn("preemption injection: sending {} to the agent (pid {}) after step {}",
                              signal_ == SIGUSR1 ? "SIGUSR1" : "SIGTERM", ::getppid(), step_);
      ::kill(::getppid(), signal_);
      sent_ = true;
    }
  }

 private:
  std::int64_t step_;
  int signal_;
  bool sent_ = false;
};

}  // namespace tenax::examples
