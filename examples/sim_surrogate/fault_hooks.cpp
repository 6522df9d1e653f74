#include "fault_hooks.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

namespace sim {
namespace {

bool first_generation() {
  const char* restarts = std::getenv("TENAX_RESTART_COUNT");
  return restarts == nullptr || std::string(restarts) == "0";
}

void check_rank(const char* flag, int rank, int world_size) {
  if (rank < 0 || rank >= world_size) {
    throw std::invalid_argument(std::string(flag) + " " + std::to_string(rank) + " is not a rank of this world (size " +
                                std::to_string(world_size) + ")");
  }
}

}  // namespace

FaultHooks::FaultHooks(const FaultOptions& options, int rank, int world_size, std::string output_dir,
                       std::int64_t save_every)
    : options_(options),
      rank_(rank),
      output_dir_(std::move(output_dir)),
      save_every_(save_every),
      armed_(first_generation()) {
  if (options.fail_at_step >= 0) check_rank("--fail-rank", options.fail_rank, world_size);
  if (options.stop_at_step >= 0) check_rank("--stop-rank", options.stop_rank, world_size);
}

void FaultHooks::wait_for_last_checkpoint(std::int64_t step) const {
  if (save_every_ <= 0 || step < save_every_ || step % save_every_ == 0) return;
  char name[32];
  std::snprintf(name, sizeof name, "step-%09lld", static_cast<long long>(step / save_every_ * save_every_));
  const auto manifest = std::filesystem::path(output_dir_) / "checkpoints" / name / "manifest.json";
  for (int i = 0; i < 6000 && !std::filesystem::exists(manifest); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void FaultHooks::after_step(std::int64_t step) {
  if (!armed_) return;
  if (step == options_.fail_at_step && rank_ == options_.fail_rank) {
    wait_for_last_checkpoint(step);
    std::fprintf(stderr, "[sim rank %d] fault hook: SIGKILL to myself (pid %d) after solver step %lld\n", rank_,
                 static_cast<int>(::getpid()), static_cast<long long>(step));
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  if (step == options_.stop_at_step && rank_ == options_.stop_rank) {
    wait_for_last_checkpoint(step);
    std::fprintf(stderr, "[sim rank %d] fault hook: SIGSTOP to myself (pid %d) after solver step %lld%s\n", rank_,
                 static_cast<int>(::getpid()), static_cast<long long>(step),
                 save_every_ > 0 && step % save_every_ == 0 ? " (its checkpoint may still be in flight)" : "");
    std::fflush(stderr);
    armed_ = false;  // a SIGCONT lets it run on
    std::raise(SIGSTOP);
    return;
  }
  if (step == options_.preempt_at_step && rank_ == 0) {
    std::fprintf(stderr, "[sim rank 0] fault hook: sending %s to my parent (pid %d) after solver step %lld\n",
                 options_.preempt_signal == SIGTERM ? "SIGTERM" : "SIGUSR1", static_cast<int>(::getppid()),
                 static_cast<long long>(step));
    std::fflush(stderr);
    ::kill(::getppid(), options_.preempt_signal);
    armed_ = false;
  }
}

}  // namespace sim
