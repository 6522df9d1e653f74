// Where the agent's generations come from, and whom it tells how each ended. Two kinds:
//   - LocalGenerations (one node): numbers above the job's GenerationFence, the agent's own
//     key-value service as the workers' store;
//   - RendezvousGenerations (several nodes): the rendezvous client, the lease, the host election,
//     the service this node may host, bounded waits, Slurm's requeue.
// The agent's loop (agent.cpp) is the same for both: next() → run the generation → decide
// (run_decision.h) → report().
// Thread-safety: the agent's thread only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <filesystem>
#include <functional>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "generation.h"
#include "tenax/core/exit_codes.h"
#include "multi_node_plan.h"
#include "run_decision.h"
#include "run_options.h"
#include "shutdown_signals.h"
#include "tenax/core/status.h"

namespace tenax::elastic {
class KvService;
}

namespace tenax::launcher {

/// The agent stops instead of running a generation.
struct Stop {
  int exit_code = kExitFailure;
  Outcome outcome = Outcome::kFailed;
  std::string why;  ///< the agent's last line (empty: the outcome's name)
};

class GenerationSource {
 public:
  virtual ~GenerationSource() = default;

  /// The next generation, or why the agent stops. `restarts`: restarts so far, for the plan's
  /// restart count on one node. `local_work_done`, asked while a wait for the next generation
  /// lasts: whether the workers this node carries into it (in-process recovery) have all finished
  /// training meanwhile; then the node leaves the rendezvous and stops, finished, instead of
  /// waiting for a generation that its peers, finished too, will never form.
  virtual std::variant<GenerationPlan, Stop> next(int restarts, const std::function<bool()>& local_work_done) = 0;
  /// While a generation runs: OK, or aborted (the rendezvous ended it: another node) or
  /// unavailable (the service is gone, or the lease says it moved).
  virtual Status watch() { return Status::ok(); }
  /// The rendezvous's last word, without looking at the lease.
  virtual Status status() const { return Status::ok(); }
  /// Asks every node to restart (a local worker failed); no-op on one node.
  virtual void request_restart(const std::string& /*why*/) {}
  /// Acts on the decision taken after `plan`'s generation: tells the rendezvous, drops old keys,
  /// finds a lost service. A Stop when acting on it failed.
  virtual std::optional<Stop> report(const Decision& decision, const GenerationPlan& plan) = 0;
  /// The run ends (agent.json is written): last words, e.g. Slurm's requeue, stopping the service.
  virtual void close(const Stop& how) = 0;
  /// The endpoint agent.json names, and what it adds about the job's nodes.
  virtual std::string endpoint() const = 0;
  virtual void describe(nlohmann::json& /*summary*/) const {}
};

/// One node. `service` is borrowed and outlives the source.
std::unique_ptr<GenerationSource> local_generations(const RunOptions& options, elastic::KvService& service,
                                                    const std::filesystem::path& control_dir,
                                                    std::shared_ptr<spdlog::logger> log);

/// Several nodes. `signals` and `log` are the agent's and outlive the source.
std::unique_ptr<GenerationSource> rendezvous_generations(const RunOptions& options, const MultiNodePlan& plan,
                                                         const std::filesystem::path& keys_file,
                                                         const std::filesystem::path& run_dir, std::string host,
                                                         ShutdownSignals& signals, std::shared_ptr<spdlog::logger> log);

}  // namespace tenax::launcher
