// The workers of this node in one generation: their processes, where each stands, and their hang
// clocks. It starts them, turns their exits into events, finds the hung ones, stops them
// (signal, grace period, SIGKILL, reap) and writes what became of them into the run's record.
// It decides nothing: what a failure means is the agent's (agent.cpp) and the recovery policy's.
// Thread-safety: the agent's thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "hang_verdict.h"
#include "shutdown_signals.h"
#include "worker_environment.h"
#include "worker_process.h"

namespace tenax::launcher {

/// One worker of the current generation, with what the agent learned about it.
struct Worker {
  int rank = 0;
  int local_rank = 0;
  std::filesystem::path progress_file;   ///< empty unless --hang-timeout
  std::optional<WorkerProcess> process;  ///< empty when it could not be started
  bool stopped_by_agent = false;         ///< still running when the agent began stopping them
  bool unhealed_replacement = false;     ///< took a lost rank's place and has not healed yet
  /// What was said, since its progress went stale, about its waiting in a collective: once
  /// without a culprit, and once more when a culprit is found (on one node that is often a
  /// second later: the waiter's progress goes stale a moment before the culprit's does).
  enum class WaitLogged { kNothing, kWithoutCulprit, kWithCulprit } wait_logged = WaitLogged::kNothing;
  /// When the agent first saw it stopped while its progress file was not judging it (before its
  /// first step, between phases, after its last); reset when it runs again.
  std::optional<std::chrono::steady_clock::time_point> stopped_since;

  bool ended() { return !process || process->poll().has_value(); }
};

/// What one look at the workers found.
struct WorkerEvents {
  bool failed = false;        ///< a worker failed or hung
  bool config_error = false;  ///< a failed worker exited 2
  bool all_ended = true;
  bool preempted = false;         ///< a worker exited 3 in this look
  std::string failure;            ///< the first failure, one line
  std::vector<std::size_t> lost;  ///< indices of the failed and hung workers
};

class WorkerGroup {
 public:
  /// `signals` and `log` are the agent's and outlive the group. `multi_node`: the descriptions
  /// name the local rank and node `node_id`.
  WorkerGroup(const RunOptions& options, std::string host, std::string node_id, bool multi_node,
              ShutdownSignals& signals, std::shared_ptr<spdlog::logger> log);

  /// Starts the node's workers of `plan` (`as_replacements`: each heals from the job's memory).
  /// False when one could not be started: it is logged, `failure` says which, and the workers
  /// already started are stopped.
  bool start(const GenerationPlan& plan, const JobEnvironment& job, bool as_replacements, std::string& failure);

  /// The workers that ended since the last look (logged), the hung ones when `check_hangs`
  /// (--hang-timeout; `narrow_hangs`: the others live on, so a culprit found explains the silence
  /// of workers that cannot say why they are silent, see hang_verdict.h).
  WorkerEvents poll(bool check_hangs, bool narrow_hangs);

  /// `signal` to every worker's process group, up to `grace` for them to exit, then SIGKILL,
  /// then reap. A second signal to the agent cuts the grace period short.
  void stop(int signal, std::chrono::seconds grace);
  /// A restart's stop: kRestartStopSignal, never the preemption signals (DESIGN decision 12).
  void stop_for_restart();

  /// Every worker ended with 0 or 3 and at least one with 3 (after a forwarded signal).
  bool all_saved_and_preempted() const;
  bool any_preempted() const;
  bool any_running();
  bool any_succeeded() const;
  /// Every worker has ended and exited 0 (false for an empty group); polls the running ones.
  bool all_succeeded();

  /// What became of each worker, for agent.json; `reap` waits for their exit first (false for
  /// workers that are carried into the next generation).
  std::vector<nlohmann::json> record(bool reap = true);

  /// "rank 3 (local 1, pid 4242, host node2, node 1)"; one node: "rank 1 (pid 4242, host h)".
  std::string where(const Worker& w) const;

  std::vector<Worker>& workers() { return workers_; }
  bool empty() const { return workers_.empty(); }

 private:
  /// What --hang-timeout judges `w` by; nullopt when it is not judged (it ended, or has no
  /// progress file: it never reported, or finished the phase that did).
  std::optional<HangFacts> hang_facts(Worker& w) const;
  /// The hung workers (logged, with the waiters they keep); `failure` names the first.
  std::vector<std::size_t> find_hung(bool narrow, std::string& failure);

  const RunOptions& options_;
  std::string host_;
  bool multi_node_;
  std::string node_id_;
  ShutdownSignals& signals_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<Worker> workers_;
};

}  // namespace tenax::launcher
