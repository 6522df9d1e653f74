// In-process recovery on this node (DESIGN.md decision 13; the protocol with the workers is
// written in elastic/in_process_recovery.h): whether a loss may be healed in process (the state
// machine of recovery_machine.h, fed with what the job's store and the workers' processes
// say), the warm spares, and the one
// way a group of workers goes on in a new generation — survivors keep their processes (re-ranked
// when the world shrank), every ended worker is replaced by a spare or a new process. One node
// and many take the same path; only the moment differs: one node declares the next generation
// at once, many wait for the rendezvous to form it and carry their workers until then.
// It records each recovery for agent.json.
// Thread-safety: the agent's thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "recovery_machine.h"
#include "spare_pool.h"
#include "tenax/elastic/store.h"
#include "worker_group.h"

namespace tenax::launcher {

/// The generation a group of workers comes from.
struct PreviousGeneration {
  int generation = 0;
  int world_size = 0;
  std::string store_endpoint;
};

class RecoveryCoordinator {
 public:
  /// `options`, `job` and `log` are the agent's and outlive this.
  RecoveryCoordinator(const RunOptions& options, const JobEnvironment& job, bool multi_node,
                      std::shared_ptr<spdlog::logger> log);
  ~RecoveryCoordinator();

  bool enabled() const { return options_.recovery == RecoveryMode::kInProcess; }

  /// The job's store for `plan`'s generation (the agent's own on one node, the rendezvous host's
  /// across nodes, which moves with the host).
  void use_store(const std::string& endpoint) { store_endpoint_ = endpoint; }

  /// A group started afresh in `plan`: nobody has healed in it yet; the warm spares start.
  void started(const GenerationPlan& plan);
  /// Each look at the workers: ended spares noticed, the pool refilled once a heal had its moment.
  void tend_spares();
  void drop_spares() { spares_.reset(); }

  /// Tells the workers that generation `next` replaces `lost_generation`: this node's layout in
  /// it, the declaration every survivor waits for, and the mark that wakes waits of the old one.
  void declare_generation(int lost_generation, const GenerationPlan& next);

  /// The machine's answer for a loss of `lost` (indices into group; logged when no); when yes,
  /// the lost workers are killed (a hung one) and reaped. `restarts`: charged by the run loop so far.
  bool may_recover(WorkerGroup& group, const std::vector<std::size_t>& lost, bool config_error,
                   const GenerationPlan& plan, int restarts);

  /// `group`, from generation `from`, goes on in `plan`: the generation is declared, live
  /// workers keep their processes (ranks from plan's layout), ended ones are replaced. False,
  /// with the reason logged, when they cannot (the world grows, the store moved, a worker
  /// already finished, the store cannot be reached): the caller restarts from the newest checkpoint.
  bool recover(WorkerGroup& group, const GenerationPlan& plan, const PreviousGeneration& from);

  /// Across nodes: keeps `group` alive until the rendezvous forms the next generation.
  void carry(WorkerGroup&& group, const GenerationPlan& plan);
  bool carrying() const { return carried_.has_value(); }
  /// Whether every carried worker has exited 0: training ended before the next generation formed
  /// (a false alarm near the end, whose old generation's collectives still worked).
  bool carried_finished() { return carried_ && carried_->all_succeeded(); }
  /// The carried group and where it comes from; carrying() is false afterwards.
  std::pair<WorkerGroup, PreviousGeneration> take_carried();
  /// The job ends: carried workers are stopped, spares too.
  void stop();

  int recoveries() const { return recoveries_; }
  /// One node: fault events healed in process so far, charged to --max-restarts (across nodes
  /// the loop charges the generations the rendezvous forms).
  int healed_events() const { return machine_.charged_events(); }
  /// Whether the loss judged last since the previous call counts against --max-restarts (true
  /// when none was judged: a plain failure); resets to true.
  bool take_charge() { return machine_.take_charge(); }
  const std::vector<nlohmann::json>& records() const { return records_; }

 private:
  elastic::Store& store();
  Loss loss_seen(WorkerGroup& group, const std::vector<std::size_t>& lost, bool config_error,
                 const GenerationPlan& plan, int restarts);
  /// Where warm spare `spare_id` reports its progress once it takes a rank.
  std::filesystem::path spare_progress_file(int spare_id) const;
  /// A warm spare or a new process in lost worker `w`'s place; returns how ("warm spare 3").
  std::string replace_worker(Worker& w, const GenerationPlan& plan);

  const RunOptions& options_;
  const JobEnvironment& job_;
  bool multi_node_;
  std::shared_ptr<spdlog::logger> log_;
  std::string store_endpoint_;
  std::unique_ptr<elastic::Store> store_;
  std::string connected_endpoint_;
  std::optional<SparePool> spares_;
  int next_spare_id_ = 0;
  RecoveryMachine machine_;
  int recoveries_ = 0;
  std::vector<nlohmann::json> records_;
  std::optional<WorkerGroup> carried_;
  PreviousGeneration carried_from_;
};

}  // namespace tenax::launcher
