// Warm spare workers for in-process recovery (`tenax run --recovery in-process --spares K`):
// processes of the user's program started ahead of need, so that they have loaded libtorch and
// run the program up to WorkerContext::from_env(), where they wait until the agent assigns one
// a lost rank (elastic/in_process_recovery.h). Taking a spare costs the job a store message
// instead of a process start; the pool then starts another.
// A spare that dies is logged and replaced; it never fails the job.
// Thread-safety: the agent's thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "worker_process.h"

namespace tenax::launcher {

struct Spare {
  int id = 0;
  WorkerProcess process;
};

class SparePool {
 public:
  /// `spawn(id)` starts the spare with that id (throws tenax::Error when it cannot). Ids are
  /// taken from `*next_id`, which outlives the pool: a spare's id names its assignment in the
  /// store, so no two spares of one agent may ever share one.
  using Spawn = std::function<WorkerProcess(int id)>;
  SparePool(int size, Spawn spawn, int* next_id, std::shared_ptr<spdlog::logger> log);
  ~SparePool();
  SparePool(const SparePool&) = delete;
  SparePool& operator=(const SparePool&) = delete;

  /// Starts spares until `size` are running; a spare that cannot be started is logged.
  void fill();
  /// Notices spares that ended (logged; fill() replaces them).
  void poll();
  /// A running spare, removed from the pool; nullopt when none is left.
  std::optional<Spare> take();
  /// SIGTERM to every spare, SIGKILL after `grace`, reaped.
  void stop(std::chrono::milliseconds grace);
  int running() const { return static_cast<int>(spares_.size()); }

 private:
  int size_;
  Spawn spawn_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<Spare> spares_;
  int* next_id_;
  int failed_starts_ = 0;
};

}  // namespace tenax::launcher
