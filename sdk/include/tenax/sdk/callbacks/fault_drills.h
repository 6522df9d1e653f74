// Fire drills: callbacks that kill, stop or preempt a real run at a chosen step, so that a job's
// fault tolerance (restarts, in-process recovery, requeue) is tried before a node really dies.
// `tenax train`'s [run] table (fail_at_step, fail_rank, fail_signal, preempt_at_step,
// preempt_signal), the examples, the demos and the integration tests use them, so that a drill
// means the same thing everywhere. Header-only.
// Thread-safety: called from the training thread only, as every TrainerCallback.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "tenax/core/logging.h"
#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {

/// Kills this process with SIGKILL (or stops it with SIGSTOP: a hung worker, for
/// `tenax run --hang-timeout`) after step `step` on rank `rank`, first generation only
/// (restart_count 0), so the restarted job runs through. So that a test knows which checkpoint
/// the resume must use, the kill waits (up to a minute) until the last periodic save before
/// `step` is committed: async saves commit in the background, and a crash loses the one in
/// flight. At a save step the process dies before that step's own save. (The same change as main's 6a704c0 made inside
/// synthetic_regression.)
class FailureInjection final : public TrainerCallback {
 public:
  FailureInjection(std::int64_t step, int rank, std::int64_t restart_count, int signal = SIGKILL)
      : step_(step), rank_(rank), armed_(restart_count == 0), signal_(signal) {}
  void on_step_end(const TrainingArguments& args, TrainerState& state, TrainerControl&) override {
    if (armed_ && state.global_step == step_ && state.rank == rank_) {
      // The save of `step` itself comes after this callback: at a save step, the one before.
      const std::int64_t last_save = (step_ - 1) / std::max<std::int64_t>(args.save_steps, 1) * args.save_steps;
      if (args.save_steps > 0 && last_save > 0) {
        char name[32];
        std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(last_save));
        const auto manifest = std::filesystem::path(args.output_dir) / "checkpoints" / name / "manifest.json";
        for (int i = 0; i < 6000 && !std::filesystem::exists(manifest); ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      }
      logger("tenax.drill")
          ->warn("failure injection: rank {} {} after step {}", rank_,
                 signal_ == SIGSTOP ? "stops itself with SIGSTOP (hangs)" : "kills itself with SIGKILL", step_);
      armed_ = false;
      std::raise(signal_);
    }
  }

 private:
  std::int64_t step_;
  int rank_;
  bool armed_;
  int signal_;
};

/// A second failure while a generation heals (`tenax run --recovery in-process`): the first
/// process that takes a lost rank's place (restart count 1) SIGKILLs itself when it has joined
/// the new generation and before it has received its state, so that the survivors, already
/// in the new generation, lose a peer again and must heal once more.
class FailureWhileHealing final : public TrainerCallback {
 public:
  FailureWhileHealing(bool replacement, std::int64_t restart_count) : armed_(replacement && restart_count == 1) {}
  void on_restart(const TrainingArguments&, TrainerState& state, TrainerControl&) override {
    if (!armed_) return;
    logger("tenax.drill")
        ->warn("failure injection: rank {} (a replacement) kills itself with SIGKILL while it heals", state.rank);
    std::raise(SIGKILL);
  }

 private:
  bool armed_;
};

/// Sends `signal` to the agent (this worker's parent) after step `step`, from rank 0 — the way
/// Slurm's warning signal or scancel reaches a job — so that the preemption path can be tested.
/// A worker with no agent (started directly, by srun or by hand: no TENAX_RUN_DIR) gets the
/// signal itself, as Slurm sends it to the job's processes.
class PreemptionInjection final : public TrainerCallback {
 public:
  PreemptionInjection(std::int64_t step, int signal) : step_(step), signal_(signal) {}
  void on_step_end(const TrainingArguments&, TrainerState& state, TrainerControl&) override {
    if (!sent_ && state.global_step == step_ && state.rank == 0) {
      const bool has_agent = std::getenv("TENAX_RUN_DIR") != nullptr;
      const pid_t target = has_agent ? ::getppid() : ::getpid();
      logger("tenax.drill")
          ->warn("preemption injection: sending {} to the {} (pid {}) after step {}",
                 signal_ == SIGUSR1 ? "SIGUSR1" : "SIGTERM", has_agent ? "agent" : "worker itself", target, step_);
      ::kill(target, signal_);
      sent_ = true;
    }
  }

 private:
  std::int64_t step_;
  int signal_;
  bool sent_ = false;
};

}  // namespace tenax::sdk
