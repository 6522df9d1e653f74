// The `tenax run` agent: starts this node's workers as one generation, watches them, and on any
// failure stops them all (or heals the loss in process) and starts the next generation, until
// they finish, the restart budget is spent, they are preempted, or the agent itself is told to
// stop. At the end the run's story is written to <run dir>/agent.json.
//
// One loop for one node and many (agent.cpp):
//   GenerationSource::next()    the plan: who runs, where their store is (generation_source.h:
//                               the job's fence on one node; the rendezvous across nodes)
//   run the generation          WorkerGroup (worker_group.h) starts and watches the workers;
//                               RecoveryCoordinator (recovery_coordinator.h) heals a loss in
//                               process when recovery_policy.h allows it
//   decide_after_generation()   exit with which code, or restart (run_decision.h, pure)
//   GenerationSource::report()  tell the rendezvous, drop old keys, find a lost service
//
// One generation:
//   spawn N workers (own process groups, torchrun-compatible env: worker_environment.h)
//   poll every --monitor-interval: waitid(WNOWAIT) on each worker, and the agent's SIGINT/SIGTERM
//   a worker killed by a signal or exiting non-zero (other than 3) → the generation failed:
//     kRestartStopSignal (SIGUSR2, never a preemption signal) to every group, wait up to the
//     grace period, SIGKILL, reap
//   a worker exiting 2 (usage/configuration error) → stop the others, no restart, exit 2
//   all exited 0 → finished (exit 0); all exited 0 or 3, at least one 3 → preempted (exit 3)
//
// Multi-node (a MultiNodePlan: --nnodes, --rdzv-endpoint or srun): one agent per node; the
// rendezvous forms each generation and assigns this node its ranks (RANK = rank offset + local
// rank; MASTER_ADDR:MASTER_PORT = node rank 0's host and the free port its agent offered). A
// local failure asks every node to restart; the rendezvous ending the generation (another node
// failed, left or was lost) stops the local workers; all local workers finished → FINISHED (the
// other nodes go on undisturbed); preempted under Slurm → node rank 0 requeues the job once.
// The hosting agent stays until every other node has finished or gone: they need its service.
// The job goes on while at least MIN nodes re-join within --join-timeout.
//
// Thread-safety: run() is called once, from the main thread (it installs signal handlers).
//
//   tenax::elastic::KvService service;
//   service.start("tcp://127.0.0.1:0");
//   return tenax::launcher::Agent(options, service).run();
#pragma once

#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "multi_node_plan.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/progress_file.h"
#include "run_options.h"
#include "worker_environment.h"

namespace tenax::elastic {
class KvService;
}

namespace tenax::launcher {

/// The signal that stops workers for a restart (a peer failed, the generation ended, a hang).
/// Not SIGTERM: workers take SIGTERM and SIGUSR1 for a preemption (Slurm's warning, scancel, a
/// time limit) and answer it by voting, saving and exiting 3, and a vote reaches every rank of
/// the communicator, so an agent that stopped its workers with SIGTERM for a restart made the
/// whole job save and exit 3 as "preempted" (issue 12: a paused agent ended the job). The SDK
/// installs no handler for SIGUSR2, so its default action ends the worker at once, wherever it
/// is (blocked in a collective included); a worker that catches it may clean up within
/// --grace-period, after which SIGKILL follows.
inline constexpr int kRestartStopSignal = SIGUSR2;

/// How often the agent looks at its workers while it stops them (--monitor-interval while they run).
inline constexpr std::chrono::milliseconds kPollInterval = kDefaultMonitorInterval;

/// The port of "tcp://host:PORT" (tenax::Endpoint); throws tenax::ConfigError when there is none.
int endpoint_port(const std::string& endpoint);

class Agent {
 public:
  /// Single node. `service` is borrowed: already started with the keys of
  /// job_keys_path(options) (the workers get that file), and it must outlive the agent.
  Agent(RunOptions options, elastic::KvService& service);
  /// Multi-node: the agent joins (and, if the plan says so, hosts) the rendezvous itself.
  Agent(RunOptions options, MultiNodePlan plan);

  /// Runs generations until done and returns the exit code for the process (0, 1, 3 or
  /// 128 + signal). Throws ConfigError when the run directory cannot be created.
  int run();

 private:
  RunOptions options_;
  elastic::KvService* service_ = nullptr;
  std::optional<MultiNodePlan> plan_;
};

}  // namespace tenax::launcher
