#include "agent.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "exit_status.h"
#include "free_port.h"
#include "generation_claim.h"
#include "recovery_policy.h"
#include "shutdown_signals.h"
#include "spare_pool.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/host_election.h"
#include "tenax/elastic/in_process_recovery.h"
#include "tenax/elastic/job_keys.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/rendezvous_client.h"
#include "tenax/elastic/rendezvous_lease.h"
#include "tenax/elastic/rendezvous_service.h"
#include "tenax/elastic/store.h"
#include "slurm_requeue.h"
#include "worker_process.h"

extern char** environ;

namespace tenax::launcher {
namespace {

using Clock = std::chrono::steady_clock;

enum class Outcome {
  kFinished,
  kFailed,
  kConfigError,
  kPreempted,
  kInterrupted,
  kRendezvousRestart,  // multi-node: the rendezvous ended the generation (another node)
  kRendezvousLost,     // multi-node: the rendezvous service is gone
  kRequeued,           // multi-node under Slurm: no generation could form; the job was requeued
};

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kFinished: return "finished";
    case Outcome::kFailed: return "failed";
    case Outcome::kConfigError: return "configuration error";
    case Outcome::kPreempted: return "preempted";
    case Outcome::kInterrupted: return "interrupted";
    case Outcome::kRendezvousRestart: return "restarted by the rendezvous";
    case Outcome::kRendezvousLost: return "rendezvous service lost";
    case Outcome::kRequeued: return "requeued: no generation could form";
  }
  return "unknown";
}

// One worker of the current generation, with what the agent learned about it.
struct Worker {
  int rank = 0;
  int local_rank = 0;
  std::filesystem::path progress_file;   // empty unless --hang-timeout
  std::optional<WorkerProcess> process;  // empty when it could not be started
  bool stopped_by_agent = false;         // still running when the agent began stopping them
  bool unhealed_replacement = false;     // took a lost rank's place and has not healed yet

  bool ended() { return !process || process->poll().has_value(); }
};

struct GenerationRecord {
  int generation = 0;
  int master_port = 0;
  Outcome outcome = Outcome::kFailed;
  std::string reason;  // multi-node: why the rendezvous ended it
  std::vector<nlohmann::json> workers;
};

// Who runs in one generation: all ranks on this node (single node), or this node's share.
struct GenerationPlan {
  int generation = 0;
  int node_rank = 0;
  int num_nodes = 1;
  int rank_offset = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;  // MASTER_PORT: picked by the agent of node rank 0 for this generation
  std::string store_endpoint;
};

std::string hostname() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown";
  return buffer;
}

// The command as an operator would type it; arguments with odd characters in single quotes.
std::string shell_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    const bool plain =
        !w.empty() &&
        w.find_first_not_of(
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
            std::string::npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
  return out;
}

// After an in-process recovery, how long the agent waits before it starts a new warm spare.
constexpr std::chrono::seconds kSpareRefillDelay{2};

class RunLoop {
 public:
  RunLoop(const RunOptions& options, elastic::KvService* service, const MultiNodePlan* plan)
      : options_(options),
        service_(service),
        plan_(plan),
        log_(logger("tenax.launcher")),
        host_(plan ? plan->host : hostname()),
        inherited_env_(current_environment()),
        run_id_(!options.rdzv_id.empty()                 ? options.rdzv_id
                : plan && plan->slurm                   ? plan->slurm->job_id
                                                        : std::string("none")) {}

  int run();

 private:
  int run_single();
  int run_multi();
  // Joins the next generation, waking for signals; nullopt (with `exit_code` set) when the
  // agent must stop instead. A rendezvous service lost or moved meanwhile is found again.
  std::optional<elastic::Assignment> join_generation(int& exit_code, Outcome& outcome);
  // Multi-node: finds the job's rendezvous service through the lease in the job's directory,
  // or hosts it when the election says so (host_election.h); connects client_ to it. False
  // (with `exit_code` and `outcome` set) when none answers within --join-timeout, or a signal.
  bool locate_service(const std::string& why, int& exit_code, Outcome& outcome);
  // Hosts the service for `term`: binds, claims the term in the lease; false if another node
  // claimed it first.
  bool host_service(std::int64_t term, const std::string& reason);
  void connect_client(const std::string& endpoint);
  // The lease says the service this agent uses is gone (its holder stopped renewing) or moved
  // (another node holds a newer term, or this node's own term was taken): the reason, else "".
  std::string service_moved();
  std::int64_t unix_ms() const;
  // A generation cannot form (too few nodes, or no rendezvous service) and waiting longer is
  // pointless: under Slurm, ask for a requeue (exit 3) rather than hold the allocation idle;
  // elsewhere exit 1. Returns the exit code.
  int give_up_waiting(const std::string& what);
  // Hosting agent: waits until no other node is left that needs the service.
  void wait_for_other_nodes();
  void requeue_if_slurm_rank0(int node_rank);
  GenerationRecord run_generation(GenerationPlan plan, int restart_count);
  WorkerEnvironment environment_for(const GenerationPlan& plan, int local, int restart_count) const;
  bool in_process_recovery() const { return options_.recovery == RecoveryMode::kInProcess; }
  // --node-id across nodes; one node is "local". Names the node's layout and spares in the store.
  const std::string& node_id() const { return plan_ ? plan_->node_id : kLocalNodeId; }
  // Starts this node's workers of `plan` (the spares too), or, after an in-process recovery
  // across nodes, carries on the workers that outlived the last generation (continue_in_process).
  // Empty when one could not be started (logged, the restart asked for).
  std::vector<Worker> start_workers(GenerationPlan& plan, int restart_count);
  // Multi-node in-process recovery, after the rendezvous formed `plan`: the workers carried
  // from the last generation go on in it (ranks from the new layout: a lost node shrinks the
  // world), the lost ones are replaced. False, with the reason logged, when they cannot: the
  // caller stops them and starts the generation afresh, from the newest checkpoint.
  bool continue_in_process(std::vector<Worker>& workers, GenerationPlan& plan, int restart_count);
  // Multi-node: keeps `workers` alive for the next generation when the policy allows it (the
  // lost ones killed first); false when they must be stopped (the reason logged).
  bool carry_in_process(std::vector<Worker>& workers, const std::vector<std::size_t>& lost, bool config_error,
                        const GenerationPlan& plan, int restart_count);
  // The policy's answer for a loss of `lost` (logged when no); when yes, the lost workers are
  // killed (a hung one) and reaped. The one gate of replace_in_process and carry_in_process.
  bool may_recover_in_process(std::vector<Worker>& workers, const std::vector<std::size_t>& lost, bool config_error,
                              const GenerationPlan& plan, int restart_count);
  // What in-process recovery needs from the workers of `plan`'s generation (recovery_policy.h),
  // read from the job's store; `lost` are the indices of the lost workers.
  LossFacts loss_facts(std::vector<Worker>& workers, const std::vector<std::size_t>& lost, bool config_error,
                       const GenerationPlan& plan, int restart_count);
  // Tells the workers that generation `next` replaces `lost_generation`: this node's layout in
  // it, the declaration every survivor waits for, and the mark that wakes waits of the old one.
  void declare_generation(elastic::Store& store, int lost_generation, const GenerationPlan& next);
  // Puts a warm spare or a new process in lost worker `w`'s place in generation plan.generation;
  // returns how ("warm spare 3", "a new process").
  std::string replace_worker(elastic::Store& store, Worker& w, const GenerationPlan& plan, int restart_count);
  // In-process recovery (recovery_policy.h): when the policy allows it, the `lost` workers are
  // replaced (by a warm spare or a new process) as generation plan.generation + 1 while the
  // others keep running; plan.generation is advanced. False: restart the generation instead.
  bool replace_in_process(std::vector<Worker>& workers, const std::vector<std::size_t>& lost, bool config_error,
                          GenerationPlan& plan, int restart_count);
  // This agent's own connection to its key-value service (in-process recovery's messages).
  elastic::Store& recovery_store();
  bool hung(Worker& w);
  // The workers hung now (--hang-timeout), each logged; see the definition for stopped ones.
  std::vector<std::size_t> find_hung(std::vector<Worker>& workers);
  std::string where(const Worker& w) const;
  // `signal` to every worker's process group, up to `grace` for them to exit, then SIGKILL.
  void stop_workers(std::vector<Worker>& workers, int signal, std::chrono::seconds grace);
  // A restart's stop: kRestartStopSignal, never the preemption signals (DESIGN decision 12).
  void stop_workers(std::vector<Worker>& workers) {
    stop_workers(workers, kRestartStopSignal, options_.grace_period);
  }
  // `reap`: wait for the workers' exit (false for the workers carried into the next generation).
  GenerationRecord finish_record(int generation, Outcome outcome, std::vector<Worker>& workers, bool reap = true);
  void write_summary(int exit_code, Outcome outcome, int restarts);
  void set_identity(int generation) {
    LogIdentity identity;
    identity.rank = -1;
    identity.generation = generation;
    // Multi-node: several agents write to one job log (srun), so each line names its host.
    identity.role = plan_ ? "agent@" + host_ : "agent";
    set_log_identity(identity);
  }

  const RunOptions& options_;
  elastic::KvService* service_;      // single node
  const MultiNodePlan* plan_;        // multi-node
  std::unique_ptr<elastic::RendezvousService> rdzv_service_;
  std::unique_ptr<elastic::LeaseKeeper> lease_keeper_;  // while this agent hosts the service
  std::unique_ptr<elastic::RendezvousClient> client_;
  std::optional<elastic::LeaseFile> lease_file_;
  std::optional<elastic::HostElection> election_;
  std::optional<elastic::JobKeys> keys_;
  elastic::HeartbeatOptions heartbeat_;
  std::int64_t last_generation_ = -1;  // carried by a new client's JOINs (failover)
  Clock::time_point next_lease_check_{};
  std::shared_ptr<spdlog::logger> log_;
  std::string host_;
  std::vector<std::string> inherited_env_;
  std::string run_id_;  // TORCHELASTIC_RUN_ID: --rdzv-id, else the Slurm job id, else torchrun's "none"
  std::filesystem::path run_dir_;
  std::filesystem::path keys_file_;  // absolute; every worker gets it as TENAX_KEYS_FILE
  std::string endpoint_;
  ShutdownSignals signals_;
  std::vector<GenerationRecord> history_;
  Clock::time_point next_hang_check_{};
  std::unique_ptr<elastic::Store> recovery_store_;
  int in_process_recoveries_ = 0;
  int next_spare_id_ = 0;
  int ready_generation_ = -1;  // a generation of this run_generation() in which every rank healed in process
  Clock::time_point refill_spares_after_{};  // no new warm spare before (kSpareRefillDelay)
  std::vector<nlohmann::json> recoveries_;  // agent.json "in_process_recoveries"
  std::optional<SparePool> spares_;         // --recovery in-process: this node's warm spares
  std::string store_endpoint_;              // the workers' store (recovery_store() connects to it)
  std::string recovery_store_endpoint_;     // where recovery_store_ is connected
  // Multi-node in-process recovery: the workers that outlive a generation, waiting in rejoin
  // for the next one; with the generation and world they were in, and their store.
  std::vector<Worker> carried_;
  int carried_generation_ = -1;
  int carried_world_ = 0;
  std::string carried_store_endpoint_;
  int multi_restarts_ = 0;  // run_multi's restarts so far (each in-process recovery is one)
  static inline const std::string kLocalNodeId = "local";
};

int RunLoop::run() {
  std::string dir = options_.run_dir.string();
  // Multi-node: "%n" is this node's id, so that nodes sharing a file system keep their own.
  for (auto at = dir.find("%n"); plan_ && at != std::string::npos; at = dir.find("%n", at)) {
    dir.replace(at, 2, plan_->raw_node_id);
    at += plan_->raw_node_id.size();
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    throw ConfigError("tenax run: cannot create run directory '" + dir +
                      "': " + ec.message() + "; pass --run-dir with a writable directory");
  }
  run_dir_ = std::filesystem::absolute(dir).lexically_normal();
  keys_file_ = std::filesystem::absolute(job_keys_path(options_)).lexically_normal();
  return plan_ ? run_multi() : run_single();
}

int RunLoop::run_single() {
  endpoint_ = service_->endpoint();

  const int n = options_.nproc_per_node;
  int restarts = 0;
  int exit_code = 1;
  Outcome final_outcome = Outcome::kFailed;
  // Generations are numbered above the job's fence and recorded in it before their workers
  // start (as the rendezvous does for multi-node jobs): a rerun in the same directory goes on
  // above the last run's numbers, whose checkpoints its workers could otherwise not commit.
  const elastic::GenerationFence fence(keys_file_.parent_path());
  for (int generation = 0;; ++generation) {
    generation = static_cast<int>(advance_fence_from(fence, generation));
    set_identity(generation);
    GenerationPlan plan;
    plan.generation = generation;
    plan.world_size = n;
    plan.master_port = pick_free_port();
    plan.store_endpoint = endpoint_;
    GenerationRecord record = run_generation(plan, restarts);
    record.master_port = plan.master_port;
    final_outcome = record.outcome;
    history_.push_back(std::move(record));

    if (final_outcome == Outcome::kFinished) {
      log_->info("all {} finished", plural(n, "worker"));
      exit_code = 0;
      break;
    }
    if (final_outcome == Outcome::kConfigError) {
      log_->error(
          "a worker exited with status {} (usage or configuration error; its message is above): "
          "restarting cannot fix that, so no restart; fix the command line or configuration "
          "and submit again",
          kConfigErrorExitCode);
      exit_code = kConfigErrorExitCode;
      break;
    }
    if (final_outcome == Outcome::kPreempted) {
      if (signals_.received() != 0) log_->info("workers saved their checkpoint after {}", signal_name(signals_.received()));
      log_->warn(
          "workers were preempted (exit status {}); exiting {} so that the job can be "
          "requeued and resume from its checkpoint",
          kPreemptedExitCode, kPreemptedExitCode);
      exit_code = kPreemptedExitCode;
      break;
    }
    if (final_outcome == Outcome::kInterrupted || signals_.received() != 0) {
      final_outcome = Outcome::kInterrupted;
      const int sig = signals_.received();
      log_->warn("agent stopped by {}; exiting {}", signal_name(sig), exit_code_for_signal(sig));
      exit_code = exit_code_for_signal(sig);
      break;
    }
    if (restarts >= options_.max_restarts) {
      log_->error("restart budget spent ({}); giving up", plural(restarts, "restart"));
      exit_code = 1;
      break;
    }
    ++restarts;
    const std::string old_prefix = "gen/" + std::to_string(generation) + "/";
    try {
      service_->drop_prefix(old_prefix);
    } catch (const Error& e) {
      log_->warn("could not drop the keys of generation {} ({}): {}", generation, old_prefix,
                 e.what());
    }
    set_identity(generation + 1);
    log_->warn("restarting all {} as generation {} (restart {} of {})", plural(n, "worker"),
               generation + 1, restarts, options_.max_restarts);
  }
  write_summary(exit_code, final_outcome, restarts);
  return exit_code;
}

int RunLoop::run_multi() {
  const MultiNodePlan& plan = *plan_;
  set_identity(0);
  const int n = options_.nproc_per_node;
  if (plan.slurm) {
    const SlurmJob& job = *plan.slurm;
    log_->info("Slurm job {}: node {} of {} ({}), task {}, SLURM_RESTART_COUNT={}", job.job_id, job.node_id,
               job.num_nodes, host_, job.proc_id,
               job.restart_count ? std::to_string(*job.restart_count) + " (requeued " +
                                       plural(*job.restart_count, "time") + ")"
                                 : std::string("unset (first run of the job)"));
  }
  heartbeat_ = elastic::HeartbeatOptions().interval(options_.heartbeat_interval).liveness(options_.heartbeat_liveness);
  // The hosting agent writes the job's keys (or reuses those of an earlier run of the job: a
  // requeued job keeps them); the other agents wait for the file on the shared file system.
  keys_ = plan.hosts_service
              ? elastic::create_or_read_job_keys(keys_file_)
              : elastic::wait_for_job_keys(keys_file_, options_.join_timeout, [this](std::chrono::seconds waited) {
                  log_->info("waiting {} s for the job's key file {}, which the agent hosting the rendezvous writes",
                             waited.count(), keys_file_.string());
                });
  // The lease lives beside the keys, in the directory every node of the job shares.
  const auto lease_timeout = options_.lease_timeout.count() > 0 ? options_.lease_timeout : heartbeat_.expiry() * 2;
  lease_file_.emplace(keys_file_.parent_path());
  election_.emplace(plan.node_id, elastic::HostElectionOptions(plan.position, lease_timeout)
                                      .stagger_step(heartbeat_.interval() * 2));
  log_->info("node {} on {}: {} per node, {}..{} node(s), rendezvous {} (lease {}, timeout {} ms{})", plan.node_id,
             host_, plural(n, "worker"), plan.nodes.min, plan.nodes.max,
             plan.may_host ? "found through the lease" : "at " + plan.connect_endpoint(),
             lease_file_->path().string(), lease_timeout.count(),
             plan.may_host ? ", position " + std::to_string(plan.position) + " in the failover order"
                           : std::string(", never hosted here: --rdzv-host no"));
  {
    int code = 1;
    Outcome outcome = Outcome::kFailed;
    if (!locate_service("starting", code, outcome)) {
      history_.clear();
      write_summary(code, outcome, 0);
      return code;
    }
  }

  int restarts = 0;
  int exit_code = 1;
  int last_node_rank = -1;
  Outcome final_outcome = Outcome::kFailed;
  for (bool first = true;; first = false) {
    std::optional<elastic::Assignment> assigned = join_generation(exit_code, final_outcome);
    if (!assigned) break;
    const int generation = static_cast<int>(assigned->generation);
    last_generation_ = assigned->generation;
    set_identity(generation);
    if (!first) {
      log_->warn("generation {} formed: {} node(s), world size {}; this node runs ranks {}..{} (restart {} of {})",
                 generation, assigned->num_nodes, assigned->world_size, assigned->rank_offset,
                 assigned->rank_offset + n - 1, restarts, options_.max_restarts);
    }
    last_node_rank = assigned->node_rank;
    GenerationPlan gplan;
    gplan.generation = generation;
    gplan.node_rank = assigned->node_rank;
    gplan.num_nodes = assigned->num_nodes;
    gplan.rank_offset = assigned->rank_offset;
    gplan.world_size = assigned->world_size;
    gplan.master_addr = assigned->master_host;
    gplan.master_port = assigned->master_port;
    gplan.store_endpoint = assigned->store_endpoint;
    // TENAX_RESTART_COUNT counts the job's re-formed generations, the same on every node.
    multi_restarts_ = restarts;
    GenerationRecord record = run_generation(gplan, generation);
    record.master_port = gplan.master_port;
    final_outcome = record.outcome;
    history_.push_back(std::move(record));

    if (final_outcome == Outcome::kFinished) {
      log_->info("all {} of node {} finished; telling the rendezvous (the other nodes go on undisturbed)",
                 plural(n, "worker"), plan.node_id);
      if (Status s = client_->finish(); !s.is_ok()) log_->warn("{}", s.to_string());
      wait_for_other_nodes();
      exit_code = 0;
      break;
    }
    if (final_outcome == Outcome::kConfigError) {
      log_->error(
          "a worker exited with status {} (usage or configuration error; its message is above): "
          "restarting cannot fix that, so no restart; leaving the rendezvous (the other nodes "
          "will see it); fix the command line or configuration and submit again",
          kConfigErrorExitCode);
      (void)client_->leave();
      exit_code = kConfigErrorExitCode;
      break;
    }
    if (final_outcome == Outcome::kPreempted) {
      if (signals_.received() != 0) {
        log_->info("workers saved their checkpoint after {}", signal_name(signals_.received()));
      }
      (void)client_->finish();
      wait_for_other_nodes();
      log_->warn("workers were preempted (exit status {}); exiting {} so that the job can be "
                 "requeued and resume from its checkpoint",
                 kPreemptedExitCode, kPreemptedExitCode);
      exit_code = kPreemptedExitCode;
      break;
    }
    if ((final_outcome == Outcome::kInterrupted || signals_.received() != 0) && plan.slurm &&
        signals_.received() == SIGUSR1) {
      // Slurm's preemption warning reached workers that could not save (still starting, before
      // their handlers were installed: killed by the signal). The job must still be requeued,
      // not end FAILED: its newest committed checkpoint is where the requeued run resumes.
      log_->warn("workers did not save a checkpoint at {} (still starting?); the requeued job resumes from the "
                 "newest committed checkpoint",
                 signal_name(SIGUSR1));
      final_outcome = Outcome::kPreempted;
      (void)client_->finish();
      wait_for_other_nodes();
      log_->warn("preempted; exiting {} so that the job is requeued", kPreemptedExitCode);
      exit_code = kPreemptedExitCode;
      break;
    }
    if (final_outcome == Outcome::kInterrupted || signals_.received() != 0) {
      final_outcome = Outcome::kInterrupted;
      const int sig = signals_.received();
      log_->warn("agent stopped by {} before its workers saved a checkpoint; leaving the rendezvous; exiting {}",
                 signal_name(sig), exit_code_for_signal(sig));
      (void)client_->leave();
      exit_code = exit_code_for_signal(sig);
      break;
    }
    if (final_outcome == Outcome::kRendezvousLost) {
      Outcome outcome = Outcome::kFailed;
      if (!locate_service("the rendezvous service at " + endpoint_ + " was lost", exit_code, outcome)) {
        final_outcome = outcome;
        break;
      }
    }
    if (restarts >= options_.max_restarts) {
      log_->error("restart budget spent ({}); leaving the rendezvous and giving up (raise --max-restarts to "
                  "allow more)",
                  plural(restarts, "restart"));
      (void)client_->leave();
      exit_code = 1;
      break;
    }
    ++restarts;
    log_->warn("re-joining the rendezvous for generation {} (restart {} of {})", generation + 1, restarts,
               options_.max_restarts);
  }
  if (!carried_.empty()) {
    // Workers kept for an in-process recovery that will not come (the job gives up or stops).
    stop_workers(carried_);
    carried_.clear();
  }
  spares_.reset();
  if (final_outcome == Outcome::kPreempted && exit_code == kPreemptedExitCode) {
    write_summary(exit_code, final_outcome, restarts);
    // Before any generation formed, the node-list position stands in for the node rank.
    requeue_if_slurm_rank0(last_node_rank >= 0 ? last_node_rank : plan.position);
  } else {
    write_summary(exit_code, final_outcome, restarts);
  }
  client_.reset();
  if (rdzv_service_) {
    const elastic::RendezvousSnapshot last = rdzv_service_->snapshot();
    log_->info("rendezvous service: the longest silence of a live node was {} ms (a node is declared dead after "
               "{} ms = {} ms x {})",
               last.longest_silence_ms, heartbeat_.expiry().count(), heartbeat_.interval().count(),
               heartbeat_.liveness());
    rdzv_service_->stop();
  }
  if (lease_keeper_) lease_keeper_->release();
  lease_keeper_.reset();
  return exit_code;
}

std::optional<elastic::Assignment> RunLoop::join_generation(int& exit_code, Outcome& outcome) {
  auto started = Clock::now();
  // The service fails a round that lacks MIN nodes at --join-timeout; this bound only guards
  // against a service that accepts the joins but never answers.
  auto deadline = started + options_.join_timeout + std::chrono::seconds(30);
  log_->info("node {} joining the rendezvous at {} (needs {}..{} node(s), join timeout {} s)", plan_->node_id,
             endpoint_, plan_->nodes.min, plan_->nodes.max, options_.join_timeout.count());
  auto next_note = started + std::chrono::seconds(10);
  // Offered with every JOIN of this round; the generation's MASTER_PORT is node rank 0's offer, so
  // every node's workers get the same one, new for each generation (as torchrun's agent picks it).
  const int master_port = pick_free_port();
  while (true) {
    // Slices of one second, so that a signal or a moved service is acted on at once.
    StatusOr<elastic::Assignment> assigned = client_->join(std::chrono::seconds(1), master_port);
    if (assigned.is_ok()) return assigned.value();
    const Status& status = assigned.status();
    std::string moved = status.code() == StatusCode::kUnavailable ? status.message() : service_moved();
    if (!moved.empty()) {
      if (!locate_service(moved, exit_code, outcome)) return std::nullopt;
      started = Clock::now();
      deadline = started + options_.join_timeout + std::chrono::seconds(30);
      continue;
    }
    if (status.code() == StatusCode::kAborted) {
      // The generation formed and ended before this agent started a worker (another node
      // re-joined or was lost meanwhile): nothing to stop, join the next one.
      log_->info("node {}: {} before its workers started; joining the next generation", plan_->node_id,
                 status.message());
    } else if (status.code() != StatusCode::kDeadlineExceeded) {
      outcome = Outcome::kFailed;
      exit_code = give_up_waiting("node " + plan_->node_id + " could not join a generation: " + status.message());
      if (exit_code == kPreemptedExitCode) outcome = Outcome::kRequeued;
      return std::nullopt;
    }
    if (const int sig = signals_.received(); sig != 0) {
      (void)client_->leave();
      if (plan_->slurm && sig == SIGUSR1) {
        // Slurm's preemption warning between generations: nothing to save, requeue all the same.
        log_->warn("received {} while joining; leaving the rendezvous; exiting {} so that the job is requeued",
                   signal_name(sig), kPreemptedExitCode);
        outcome = Outcome::kPreempted;
        exit_code = kPreemptedExitCode;
        return std::nullopt;
      }
      log_->warn("received {} while joining; leaving the rendezvous; exiting {}", signal_name(sig),
                 exit_code_for_signal(sig));
      outcome = Outcome::kInterrupted;
      exit_code = exit_code_for_signal(sig);
      return std::nullopt;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      outcome = Outcome::kFailed;
      exit_code = give_up_waiting(
          "node " + plan_->node_id + ": no generation formed within " +
          std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now - started).count()) +
          " s of joining (" + status.message() + ")");
      if (exit_code == kPreemptedExitCode) outcome = Outcome::kRequeued;
      return std::nullopt;
    }
    if (now >= next_note) {
      next_note = now + std::chrono::seconds(10);
      log_->info("still waiting for a generation to form: {}", status.message());
    }
  }
}

int RunLoop::give_up_waiting(const std::string& what) {
  if (!plan_->slurm) {
    log_->error("{}; exiting 1 (start the missing nodes, or lower MIN with --nnodes, and run the job again)", what);
    return 1;
  }
  const SlurmJob& job = *plan_->slurm;
  // A cause that a requeue does not cure (a node that fails every time) must not requeue the
  // job forever.
  constexpr int kMaxRequeuesWithoutAGeneration = 3;
  if (job.restart_count.value_or(0) >= kMaxRequeuesWithoutAGeneration) {
    log_->error("{}; Slurm job {} was already requeued {} times (SLURM_RESTART_COUNT); not again: exiting 1 (check "
                "the nodes of the allocation, or lower MIN with --nnodes, and resubmit)",
                what, job.job_id, *job.restart_count);
    return 1;
  }
  log_->error("{}; asking Slurm to requeue job {} rather than hold its allocation idle (`scontrol requeue {}`); "
              "exiting {}",
              what, job.job_id, job.job_id, kPreemptedExitCode);
  // The marker that makes the requeue once per run of the job lives in the job's shared
  // directory, so that of several agents giving up together one requeues.
  const RequeueResult r = requeue_job(job.job_id, job.restart_count.value_or(0), keys_file_.parent_path(),
                                      std::chrono::seconds(30));
  if (r.outcome == RequeueResult::Outcome::kFailed) {
    log_->error("{}; exiting 1", r.message);
    return 1;
  }
  log_->warn("{}", r.message);
  return kPreemptedExitCode;
}

std::int64_t RunLoop::unix_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string RunLoop::service_moved() {
  if (!election_) return "";
  const auto now = Clock::now();
  if (now < next_lease_check_) return "";
  next_lease_check_ = now + heartbeat_.interval();
  if (lease_keeper_ && lease_keeper_->deposed()) {
    // Another node took the lease over (this agent's renewals stopped for longer than the lease
    // timeout: paused, or cut off from the shared file system): its service is the job's now.
    log_->warn("node {} no longer holds the rendezvous lease; stopping its rendezvous service at {}",
               plan_->node_id, endpoint_);
    lease_keeper_.reset();
    if (rdzv_service_) rdzv_service_->stop();
    rdzv_service_.reset();
    return "this node's rendezvous lease was taken over by another node";
  }
  election_->observe(lease_file_->read(), now, unix_ms());
  const elastic::HostElection::Decision d = election_->decide(now);
  if (d.action == elastic::HostElection::Action::kConnect && d.lease.endpoint != endpoint_) {
    return "the rendezvous service moved to " + d.lease.endpoint + " (" + d.reason + ")";
  }
  if (d.action == elastic::HostElection::Action::kClaim && plan_->may_host && !lease_keeper_) {
    return d.reason;
  }
  return "";
}

bool RunLoop::locate_service(const std::string& why, int& exit_code, Outcome& outcome) {
  const MultiNodePlan& plan = *plan_;
  const auto started = Clock::now();
  if (client_) log_->warn("{}; looking for the job's rendezvous service in {}", why, lease_file_->path().string());
  auto next_note = started + std::chrono::seconds(5);
  while (true) {
    const auto now = Clock::now();
    election_->observe(lease_file_->read(), now, unix_ms());
    const elastic::HostElection::Decision d = election_->decide(now);
    if (d.action == elastic::HostElection::Action::kConnect) {
      const bool same = d.lease.endpoint == endpoint_ && client_ &&
                        client_->status().code() != StatusCode::kUnavailable;
      if (!same) {
        log_->info("rendezvous service at {}: {}", d.lease.endpoint, d.reason);
        connect_client(d.lease.endpoint);
      }
      return true;
    }
    if (!plan.may_host && !election_->lease()) {
      // Stand-alone `tenax rdzv` without a lease yet (or an older one): the given endpoint.
      if (endpoint_ != plan.connect_endpoint() || !client_ ||
          client_->status().code() == StatusCode::kUnavailable) {
        connect_client(plan.connect_endpoint());
      }
      return true;
    }
    // --rdzv-host no: a standing-by `tenax rdzv` claims a dead lease, never this agent.
    if (plan.may_host && d.action == elastic::HostElection::Action::kClaim && host_service(d.term, d.reason)) {
      return true;
    }
    if (const int sig = signals_.received(); sig != 0) {
      log_->warn("received {} while looking for the rendezvous service; exiting {}", signal_name(sig),
                 exit_code_for_signal(sig));
      outcome = Outcome::kInterrupted;
      exit_code = exit_code_for_signal(sig);
      return false;
    }
    if (now - started >= options_.join_timeout) {
      outcome = Outcome::kRendezvousLost;
      exit_code = give_up_waiting("node " + plan.node_id + ": no rendezvous service found within the join timeout of " +
                                  std::to_string(options_.join_timeout.count()) + " s (" + why + "; last: " +
                                  d.reason + ")");
      if (exit_code == kPreemptedExitCode) outcome = Outcome::kRequeued;
      return false;
    }
    if (now >= next_note) {
      next_note = now + std::chrono::seconds(5);
      log_->info("still looking for the rendezvous service: {}", d.reason);
    }
    signals_.wait(std::min<std::chrono::milliseconds>(heartbeat_.interval(), std::chrono::milliseconds(200)));
  }
}

bool RunLoop::host_service(std::int64_t term, const std::string& reason) {
  const MultiNodePlan& plan = *plan_;
  lease_keeper_.reset();
  if (rdzv_service_) rdzv_service_->stop();
  const elastic::GenerationFence fence(keys_file_.parent_path());
  const StatusOr<std::int64_t> fenced = fence.current();
  const std::int64_t above = std::max({election_->highest_generation(), last_generation_,
                                       fenced.is_ok() ? fenced.value() : std::int64_t{-1}});
  auto service = std::make_unique<elastic::RendezvousService>(
      elastic::RendezvousOptions(plan.nodes.min, plan.nodes.max)
          .heartbeat(heartbeat_)
          .join_timeout(std::chrono::duration_cast<std::chrono::milliseconds>(options_.join_timeout))
          .keys(*keys_)
          .generations_above(above)
          .claim_generation(fenced_generation_claim(*lease_file_, fence, term, plan.node_id)));
  // The designated host keeps the job's well-known endpoint (--rdzv-endpoint, or the Slurm
  // default) when it can bind it; any other host, or one that cannot, binds any free port on
  // this node. Either way the lease publishes it.
  std::string endpoint;
  if (plan.hosts_service) {
    try {
      endpoint = plan.connect_endpoint(endpoint_port(service->start(plan.rdzv_bind)));
    } catch (const RendezvousError& e) {
      log_->warn("{}; hosting on another port (the lease tells the other nodes)", e.what());
    }
  }
  if (endpoint.empty()) {
    const bool loopback = plan.host == "127.0.0.1" || plan.host == "localhost";
    const std::string bound = service->start(std::string("tcp://") + (loopback ? "127.0.0.1" : "*") + ":0");
    endpoint = "tcp://" + plan.host + ":" + std::to_string(endpoint_port(bound));
  }
  elastic::LeaseRecord record;
  record.term = term;
  record.holder = plan.node_id;
  record.endpoint = endpoint;
  record.generation = above;
  bool won = false;
  try {
    won = lease_file_->claim(record);
  } catch (const Error& e) {
    log_->error("node {} cannot claim the rendezvous lease: {}", plan.node_id, e.what());
  }
  if (!won) {
    service->stop();
    log_->info("node {}: another node claimed rendezvous term {} first; following it", plan.node_id, term);
    return false;
  }
  elastic::RendezvousService* raw = service.get();
  lease_keeper_ = std::make_unique<elastic::LeaseKeeper>(*lease_file_, record, heartbeat_.interval(),
                                                         [raw] { return raw->snapshot().generation; });
  rdzv_service_ = std::move(service);
  log_->warn("node {} hosts the rendezvous service at {} (lease term {}, generations above {}): {}", plan.node_id,
             endpoint, term, above, reason);
  connect_client(endpoint);
  return true;
}

void RunLoop::connect_client(const std::string& endpoint) {
  client_.reset();
  // The service must be silent for much longer than a heartbeat expiry before a node gives up
  // on it: a busy host, or the hosting agent stopping its own workers, is not a lost service.
  // A host that is really gone shows sooner, through its lease (service_moved()).
  const auto service_timeout = std::max<std::chrono::milliseconds>(std::chrono::seconds(30), heartbeat_.expiry() * 4);
  client_ = std::make_unique<elastic::RendezvousClient>(
      endpoint, elastic::RendezvousClientOptions(plan_->node_id, host_, options_.nproc_per_node)
                    .heartbeat(heartbeat_)
                    .reconnect_backoff_max(std::max<std::chrono::milliseconds>(heartbeat_.interval(),
                                                                                std::chrono::seconds(4)))
                    .service_timeout(service_timeout)
                    .keys(*keys_)
                    .last_generation(last_generation_));
  endpoint_ = endpoint;
}

void RunLoop::wait_for_other_nodes() {
  if (!rdzv_service_) return;
  const int signals_before = signals_.count();
  auto next_note = Clock::now();
  while (true) {
    const elastic::RendezvousSnapshot snapshot = rdzv_service_->snapshot();
    if (snapshot.live.empty()) return;
    if (Clock::now() >= next_note) {
      std::string ids;
      for (const auto& id : snapshot.live) ids += (ids.empty() ? "" : ", ") + id;
      log_->info("this agent hosts the rendezvous service: waiting for {} ({}) to finish before stopping it",
                 plural(static_cast<int>(snapshot.live.size()), "other node"), ids);
      next_note = Clock::now() + std::chrono::seconds(10);
    }
    signals_.wait(std::chrono::milliseconds(100));
    if (signals_.count() > signals_before) {
      log_->warn("{} received while waiting for the other nodes; stopping the rendezvous service now",
                 signal_name(signals_.received()));
      return;
    }
  }
}

void RunLoop::requeue_if_slurm_rank0(int node_rank) {
  if (!plan_ || !plan_->slurm) {
    log_->info("not under Slurm: resubmit the job to resume from its checkpoint");
    return;
  }
  const SlurmJob& job = *plan_->slurm;
  if (node_rank != 0) {
    log_->info("node rank {}: the agent of node rank 0 requeues Slurm job {}", node_rank, job.job_id);
    return;
  }
  log_->warn("requeueing Slurm job {} (preempted; SLURM_RESTART_COUNT={}): running `scontrol requeue {}`; Slurm "
             "then stops this job, this agent included, and starts it again: the requeued run logs "
             "SLURM_RESTART_COUNT={} and resumes from the checkpoint",
             job.job_id, job.restart_count ? std::to_string(*job.restart_count) : std::string("unset"), job.job_id,
             job.restart_count.value_or(0) + 1);
  const RequeueResult r = requeue_job(job.job_id, job.restart_count.value_or(0), run_dir_, std::chrono::seconds(30));
  if (r.outcome == RequeueResult::Outcome::kFailed) {
    log_->error("{}", r.message);
  } else {
    log_->warn("{}", r.message);
  }
}

// "rank 3 (local 1, pid 4242, host node2, node 1)"; single node: "rank 1 (pid 4242, host h)".
std::string RunLoop::where(const Worker& w) const {
  std::string out = "rank " + std::to_string(w.rank) + " (";
  if (plan_) out += "local " + std::to_string(w.local_rank) + ", ";
  if (w.process) out += "pid " + std::to_string(w.process->pid()) + ", ";
  out += "host " + host_;
  if (plan_) out += ", node " + plan_->node_id;
  return out + ")";
}

// --hang-timeout: a worker whose progress file exists and has not changed for that long.
bool RunLoop::hung(Worker& w) {
  if (w.progress_file.empty() || w.ended()) return false;
  std::error_code ec;
  const auto changed = std::filesystem::last_write_time(w.progress_file, ec);
  if (ec) return false;  // never reported progress: not judged
  const auto age = std::filesystem::file_time_type::clock::now() - changed;
  return age > options_.hang_timeout;
}

std::vector<std::size_t> RunLoop::find_hung(std::vector<Worker>& workers) {
  std::vector<std::size_t> hung_now;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (hung(workers[i])) hung_now.push_back(i);
  }
  // A worker blocked in a collective on a hung peer makes no progress either. When only some of
  // them are stopped (SIGSTOP, a debugger), those are the hung ones; the others keep their
  // process under in-process recovery. Otherwise there is no telling, and all count as hung.
  std::vector<std::size_t> stopped;
  for (std::size_t i : hung_now) {
    if (workers[i].process->stopped()) stopped.push_back(i);
  }
  const bool narrow = in_process_recovery() && !stopped.empty() && stopped.size() < hung_now.size();
  for (std::size_t i : hung_now) {
    Worker& w = workers[i];
    const bool is_hung = !narrow || std::find(stopped.begin(), stopped.end(), i) != stopped.end();
    if (is_hung) {
      log_->error("worker {} made no progress for over {} s ({} unchanged, --hang-timeout {} s{}); treating it as hung",
                  where(w), options_.hang_timeout.count(), w.progress_file.string(), options_.hang_timeout.count(),
                  w.process->stopped() ? "; the process is stopped" : "");
    } else {
      log_->warn("worker {} made no progress for over {} s either, but it is running: it waits in a collective for "
                 "the stopped one; it keeps its process",
                 where(w), options_.hang_timeout.count());
    }
  }
  return narrow ? stopped : hung_now;
}

WorkerEnvironment RunLoop::environment_for(const GenerationPlan& plan, int local, int restart_count) const {
  WorkerEnvironment values;
  values.rank = plan.rank_offset + local;
  values.world_size = plan.world_size;
  values.generation = plan.generation;
  values.restart_count = restart_count;
  values.max_restarts = options_.max_restarts;
  values.rdzv_endpoint = plan.store_endpoint;
  values.master_port = plan.master_port;
  values.run_id = run_id_;
  values.run_dir = run_dir_.string();
  values.keys_file = keys_file_.string();
  values.fence_dir = keys_file_.parent_path().string();  // the job's shared control directory
  values.recovery = in_process_recovery() ? elastic::kRecoveryInProcess : "restart";
  values.node_id = node_id();
  if (plan_) {
    values.local_rank = local;
    values.local_world_size = options_.nproc_per_node;
    values.group_rank = plan.node_rank;
    values.group_world_size = plan.num_nodes;
    values.master_addr = plan.master_addr;
  }
  if (options_.hang_timeout.count() > 0) {
    values.progress_file = (run_dir_ / "progress" / ("rank-" + std::to_string(values.rank))).string();
  }
  return values;
}

elastic::Store& RunLoop::recovery_store() {
  // The workers' store: the agent's own on one node; across nodes the rendezvous host's, which
  // moves with the host.
  const std::string wanted = store_endpoint_.empty() ? endpoint_ : store_endpoint_;
  if (recovery_store_ && recovery_store_endpoint_ != wanted) recovery_store_.reset();
  if (!recovery_store_) {
    std::optional<elastic::JobKeys> keys;
    if (std::filesystem::exists(keys_file_)) keys = elastic::read_job_keys(keys_file_);
    recovery_store_ = elastic::connect_store(wanted, std::chrono::seconds(10), keys);
    recovery_store_endpoint_ = wanted;
  }
  return *recovery_store_;
}

std::vector<Worker> RunLoop::start_workers(GenerationPlan& plan, int restart_count) {
  const int n = options_.nproc_per_node;
  if (!carried_.empty()) {
    std::vector<Worker> workers = std::move(carried_);
    carried_.clear();
    if (continue_in_process(workers, plan, restart_count)) return workers;
    stop_workers(workers);
    spares_.reset();
  }
  if (plan_) {
    log_->info("starting {} (generation {}, node rank {} of {}, ranks {}..{} of {}): {}", plural(n, "worker"),
               plan.generation, plan.node_rank, plan.num_nodes, plan.rank_offset, plan.rank_offset + n - 1,
               plan.world_size, shell_words(options_.command));
  } else {
    log_->info("starting {} (generation {}): {}", plural(n, "worker"), plan.generation,
               shell_words(options_.command));
  }
  // Across nodes under in-process recovery every worker starts as a replacement: it heals from
  // whichever workers of the generation hold state (another node's survivors), and when none
  // does, every rank of it restores from disk together. So no node needs to know what the
  // others did with their workers: each generation has one way to start, the same everywhere.
  const bool as_replacements = plan_ && in_process_recovery();
  if (as_replacements) {
    try {
      declare_generation(recovery_store(), plan.generation - 1, plan);
    } catch (const Error& e) {
      log_->error("cannot declare generation {} to the workers ({}); the job cannot start", plan.generation,
                  e.what());
      if (client_) (void)client_->request_restart("node " + plan_->node_id + " could not reach the job's store");
      return {};
    }
  }
  std::vector<Worker> workers(static_cast<std::size_t>(n));
  for (int local = 0; local < n; ++local) {
    Worker& w = workers[static_cast<std::size_t>(local)];
    WorkerEnvironment values = environment_for(plan, local, restart_count);
    values.replacement = as_replacements;
    const int rank = values.rank;
    w.rank = rank;
    w.local_rank = local;
    if (!values.progress_file.empty()) {
      w.progress_file = values.progress_file;
      std::error_code ec;
      std::filesystem::create_directories(w.progress_file.parent_path(), ec);
      std::filesystem::remove(w.progress_file, ec);  // a stale one from the last generation
    }
    try {
      w.process.emplace(
          WorkerProcess::spawn(options_.command, worker_environment(inherited_env_, values)));
      log_->debug("worker rank {} started (pid {})", rank, w.process->pid());
    } catch (const Error& e) {
      log_->error("worker rank {} (host {}) could not be started: {}", rank, host_, e.what());
      workers.resize(static_cast<std::size_t>(local) + 1);
      if (client_) (void)client_->request_restart("worker rank " + std::to_string(rank) + " on " + host_ +
                                                  " could not be started");
      stop_workers(workers);
      return {};
    }
  }
  ready_generation_ = -1;
  // Warm spares start after the workers, so that they never delay the job's own start.
  spares_.reset();
  if (in_process_recovery() && options_.spares > 0) {
    spares_.emplace(
        options_.spares,
        [this, plan, restart_count](int id) {
          WorkerEnvironment values = environment_for(plan, 0, restart_count);
          values.progress_file.clear();  // a waiting spare makes no progress and is never hung
          values.spare_id = id;
          return WorkerProcess::spawn(options_.command, worker_environment(inherited_env_, values));
        },
        &next_spare_id_, log_);
    spares_->fill();
  }
  return workers;
}

GenerationRecord RunLoop::run_generation(GenerationPlan plan, int restart_count) {
  const int n = options_.nproc_per_node;
  store_endpoint_ = plan.store_endpoint;
  std::vector<Worker> workers = start_workers(plan, restart_count);
  int generation = plan.generation;
  if (workers.empty()) return finish_record(generation, Outcome::kFailed, workers);
  // The spares outlive this generation only with the workers that are carried into the next.
  struct SparesGuard {
    RunLoop& loop;
    ~SparesGuard() {
      if (loop.carried_.empty()) loop.spares_.reset();
    }
  } spares_guard{*this};
  SparePool* spares = spares_ ? &*spares_ : nullptr;

  std::optional<Clock::time_point> preempt_deadline;
  for (;;) {
    // A worker's exit does not wake the agent (no SIGCHLD handler): it is seen within this interval.
    if (int sig = signals_.wait(options_.monitor_interval); sig != 0) {
      // Preemption (Slurm's warning signal, scancel, Ctrl-C): the workers are asked to save
      // and exit 3, not killed. SIGUSR1 is passed on as it is; SIGINT/SIGTERM as SIGTERM.
      const int forward = sig == SIGUSR1 ? SIGUSR1 : SIGTERM;
      log_->warn("received {}; forwarding {} to {} so that they checkpoint and exit {} "
                 "(SIGKILL after {} s; a second signal cuts the wait short)",
                 signal_name(sig), signal_name(forward), plural(n, "worker"), kPreemptedExitCode,
                 options_.preempt_grace.count());
      stop_workers(workers, forward, options_.preempt_grace);
      const bool saved = std::all_of(workers.begin(), workers.end(), [](Worker& w) {
        return w.process && w.process->status() &&
               (w.process->status()->preempted() || w.process->status()->succeeded());
      });
      const bool any_preempted = std::any_of(workers.begin(), workers.end(), [](Worker& w) {
        return w.process && w.process->status() && w.process->status()->preempted();
      });
      return finish_record(generation, saved && any_preempted ? Outcome::kPreempted : Outcome::kInterrupted,
                           workers);
    }
    bool failed = false;
    bool config_error = false;
    bool all_ended = true;
    std::string failure;
    std::vector<std::size_t> lost;
    if (spares) {
      spares->poll();
      if (Clock::now() >= refill_spares_after_) spares->fill();
    }
    for (std::size_t i = 0; i < workers.size(); ++i) {
      Worker& w = workers[i];
      const bool known = w.process->status().has_value();
      std::optional<ExitStatus> status = w.process->poll();
      if (!status) {
        all_ended = false;
        continue;
      }
      if (known) continue;
      if (status->failed()) {
        if (plan_) {
          log_->error("worker {} {}{}", where(w), status->kind() == ExitStatus::Kind::kSignaled ? "was " : "",
                      status->describe());
        } else {
          log_->error("worker rank {} (pid {}, host {}) {}{}", w.rank, w.process->pid(), host_,
                      status->kind() == ExitStatus::Kind::kSignaled ? "was " : "",
                      status->describe());
        }
        if (failure.empty()) {
          failure = "worker rank " + std::to_string(w.rank) + " (pid " + std::to_string(w.process->pid()) +
                    ") on " + host_ + " " + (status->kind() == ExitStatus::Kind::kSignaled ? "was " : "") +
                    status->describe();
        }
        failed = true;
        lost.push_back(i);
        config_error = config_error || status->config_error();
      } else if (status->preempted()) {
        log_->warn("worker rank {} (pid {}) exited with status {}: preempted", w.rank,
                   w.process->pid(), kPreemptedExitCode);
        if (!preempt_deadline) preempt_deadline = Clock::now() + options_.grace_period;
      } else {
        log_->info("worker rank {} (pid {}) finished", w.rank, w.process->pid());
      }
    }
    if (!failed && options_.hang_timeout.count() > 0 && Clock::now() >= next_hang_check_) {
      next_hang_check_ = Clock::now() + std::chrono::seconds(1);
      for (std::size_t i : find_hung(workers)) {
        Worker& w = workers[i];
        failed = true;
        lost.push_back(i);
        if (failure.empty()) {
          failure = "worker rank " + std::to_string(w.rank) + " on " + host_ + " hung (no progress for " +
                    std::to_string(options_.hang_timeout.count()) + " s)";
        }
      }
    }
    if (failed && !preempt_deadline && !plan_ && replace_in_process(workers, lost, config_error, plan, restart_count)) {
      generation = plan.generation;
      continue;
    }
    if (failed && !preempt_deadline && plan_ && carry_in_process(workers, lost, config_error, plan, restart_count)) {
      // The other nodes' workers keep theirs too: the rendezvous ends this generation for all.
      const Status asked = client_->request_restart(failure);
      if (!asked.is_ok()) log_->warn("the rendezvous service did not confirm the restart: {}", asked.to_string());
      GenerationRecord record = finish_record(generation, Outcome::kRendezvousRestart, carried_, /*reap=*/false);
      record.reason = failure;
      return record;
    }
    if (failed) {
      if (client_ && !config_error) {
        const Status ended = client_->status();
        if (!ended.is_ok()) {
          log_->info("(the rendezvous had already ended generation {}: {})", generation, ended.message());
        }
        log_->warn("asking every node to restart: {}; stopping the other local workers, then joining "
                   "generation {}",
                   failure, generation + 1);
        const Status asked = client_->request_restart(failure);
        if (!asked.is_ok()) log_->warn("the rendezvous service did not confirm the restart: {}", asked.to_string());
      }
      stop_workers(workers);
      return finish_record(generation, config_error ? Outcome::kConfigError : Outcome::kFailed,
                           workers);
    }
    if (all_ended) {
      const bool any_preempted = std::any_of(workers.begin(), workers.end(), [](Worker& w) {
        return w.process->status()->preempted();
      });
      return finish_record(generation, any_preempted ? Outcome::kPreempted : Outcome::kFinished,
                           workers);
    }
    if (client_ && !preempt_deadline) {
      Status rdzv = client_->status();
      if (rdzv.is_ok()) {
        // The lease shows a dead or moved service sooner than the client's own service timeout.
        if (std::string moved = service_moved(); !moved.empty()) rdzv = Status(StatusCode::kUnavailable, moved);
      }
      if (!rdzv.is_ok()) {
        const bool lost = rdzv.code() != StatusCode::kAborted;
        if (lost) {
          log_->error("{}; stopping the {} local {} (they cannot go on without a rendezvous; finding it again)",
                      rdzv.message(), n, n == 1 ? "worker" : "workers");
        } else if (in_process_recovery() && carry_in_process(workers, {}, false, plan, restart_count)) {
          log_->warn("{}; the local workers of node {} keep their processes and wait for the next generation",
                     rdzv.message(), plan_->node_id);
          GenerationRecord record =
              finish_record(generation, Outcome::kRendezvousRestart, carried_, /*reap=*/false);
          record.reason = rdzv.message();
          return record;
        } else {
          log_->warn("{}; stopping the local workers of node {} and joining the next generation", rdzv.message(),
                     plan_->node_id);
        }
        stop_workers(workers);
        GenerationRecord record =
            finish_record(generation, lost ? Outcome::kRendezvousLost : Outcome::kRendezvousRestart, workers);
        record.reason = rdzv.message();
        return record;
      }
    }
    if (preempt_deadline && Clock::now() >= *preempt_deadline) {
      for (Worker& w : workers) {
        if (w.process->status()) continue;
        log_->error(
            "worker rank {} (pid {}, host {}) was still running {} s after another "
            "worker was preempted; treating generation {} as failed",
            w.rank, w.process->pid(), host_, options_.grace_period.count(), generation);
      }
      stop_workers(workers);
      return finish_record(generation, Outcome::kFailed, workers);
    }
  }
}

LossFacts RunLoop::loss_facts(std::vector<Worker>& workers, const std::vector<std::size_t>& lost, bool config_error,
                              const GenerationPlan& plan, int restart_count) {
  LossFacts facts;
  facts.mode = options_.recovery;
  facts.config_error = config_error;
  facts.world_size = plan.world_size;
  // Across nodes TENAX_RESTART_COUNT is the generation's number; the agent's own count decides.
  facts.restarts_used = plan_ ? multi_restarts_ : restart_count + in_process_recoveries_;
  facts.max_restarts = options_.max_restarts;
  // First who has healed: every rank said so in this generation (a replacement that healed
  // holds state like any survivor), or in an earlier one of this run (a loss while the current
  // one heals comes before its count is complete).
  facts.ready = recovery_store().add(elastic::ready_key(plan.generation), 0);
  if (facts.ready >= facts.world_size) {
    ready_generation_ = plan.generation;
    for (Worker& w : workers) w.unhealed_replacement = false;  // every rank healed
  }
  if (ready_generation_ >= 0) facts.ready = facts.world_size;
  // Then who holds state: replacements that have not healed hold none, so if only they are left
  // on the only node, nobody survived. (Across nodes another node's workers may still hold it.)
  const auto holds_state = [&](std::size_t i) {
    return std::find(lost.begin(), lost.end(), i) == lost.end() && !workers[i].unhealed_replacement;
  };
  int holders = 0;
  for (std::size_t i = 0; i < workers.size(); ++i) holders += holds_state(i) ? 1 : 0;
  facts.lost = holders == 0 && !plan_ ? facts.world_size : static_cast<int>(lost.size());
  return facts;
}

void RunLoop::declare_generation(elastic::Store& store, int lost_generation, const GenerationPlan& next) {
  auto put = [&store](const std::string& key, const std::string& value) {
    store.set(key, std::vector<char>(value.begin(), value.end()));
  };
  // The layout first: a survivor that sees the declaration reads it at once.
  put(elastic::layout_key(next.generation, node_id()),
      elastic::format_node_layout({plan_ ? next.rank_offset : 0, next.world_size}));
  const std::string number = std::to_string(next.generation);
  put(elastic::kLatestKey, number);
  // Survivors wait for the generation after theirs; across nodes the rendezvous may have
  // numbered the new one further on.
  for (int g = lost_generation + 1; g <= next.generation; ++g) put(elastic::declared_key(g), number);
  store.add(elastic::generation_prefix(lost_generation) + elastic::kSupersededKey, 1);
}

std::string RunLoop::replace_worker(elastic::Store& store, Worker& w, const GenerationPlan& plan, int restart_count) {
  std::error_code ec;
  if (!w.progress_file.empty()) std::filesystem::remove(w.progress_file, ec);  // the lost worker's
  std::string how;
  if (std::optional<Spare> spare = spares_ ? spares_->take() : std::nullopt) {
    const std::string assignment = elastic::format_spare_assignment({w.local_rank, plan.generation, restart_count});
    store.set(elastic::spare_key(node_id(), spare->id), std::vector<char>(assignment.begin(), assignment.end()));
    w.process.emplace(std::move(spare->process));
    how = "warm spare " + std::to_string(spare->id);
  } else {
    WorkerEnvironment values = environment_for(plan, w.local_rank, restart_count);
    values.replacement = true;
    w.process.emplace(WorkerProcess::spawn(options_.command, worker_environment(inherited_env_, values)));
    how = "a new process";
  }
  w.stopped_by_agent = false;
  w.unhealed_replacement = true;
  return how;
}

bool RunLoop::may_recover_in_process(std::vector<Worker>& workers, const std::vector<std::size_t>& lost,
                                     bool config_error, const GenerationPlan& plan, int restart_count) {
  if (!in_process_recovery()) return false;
  LossFacts facts;
  try {
    facts = loss_facts(workers, lost, config_error, plan, restart_count);
  } catch (const Error& e) {
    log_->warn("cannot read which workers heal in process ({}); restarting instead", e.what());
    return false;
  }
  const LossDecision decision = decide_on_loss(facts);
  if (decision.action != LossAction::kReplaceInProcess) {
    log_->warn("in-process recovery is not possible: {}; every worker restarts from the newest checkpoint",
               decision.why_not);
    return false;
  }
  // A hung worker is killed, not waited on: its peers' connections to it close, which wakes them.
  for (std::size_t i : lost) {
    Worker& w = workers[i];
    if (!w.process->status()) w.process->signal_group(SIGKILL);
    w.process->reap(WorkerProcess::kReapTimeout);
  }
  return true;
}

bool RunLoop::replace_in_process(std::vector<Worker>& workers, const std::vector<std::size_t>& lost, bool config_error,
                                 GenerationPlan& plan, int restart_count) {
  if (!may_recover_in_process(workers, lost, config_error, plan, restart_count)) return false;
  const auto started = Clock::now();
  const elastic::GenerationFence fence(keys_file_.parent_path());
  const int next = static_cast<int>(advance_fence_from(fence, plan.generation + 1));
  const int lost_generation = plan.generation;
  plan.generation = next;
  ++in_process_recoveries_;
  set_identity(next);
  nlohmann::json record;
  record["lost_generation"] = lost_generation;
  record["generation"] = next;
  nlohmann::json replaced = nlohmann::json::array();
  std::vector<std::string> survivors;
  nlohmann::json survivor_records = nlohmann::json::array();
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (std::find(lost.begin(), lost.end(), i) == lost.end()) {
      survivors.push_back("rank " + std::to_string(workers[i].rank) + " pid " + std::to_string(workers[i].process->pid()));
      survivor_records.push_back({{"rank", workers[i].rank}, {"pid", workers[i].process->pid()}});
    }
  }
  try {
    elastic::Store& store = recovery_store();
    // Declared before any replacement exists: survivors may already be waiting for it.
    declare_generation(store, lost_generation, plan);
    for (std::size_t i : lost) {
      Worker& w = workers[i];
      const pid_t old_pid = w.process->pid();
      const std::string how = replace_worker(store, w, plan, restart_count + in_process_recoveries_);
      log_->warn("in-process recovery: rank {} (pid {}) is replaced by {} (pid {}) in generation {}; the other "
                 "workers keep their processes ({}) and heal it from their memory",
                 w.rank, old_pid, how, w.process->pid(), next, fmt::join(survivors, ", "));
      replaced.push_back({{"rank", w.rank}, {"lost_pid", old_pid}, {"pid", w.process->pid()}, {"by", how}});
    }
  } catch (const Error& e) {
    log_->error("in-process recovery failed ({}); every worker restarts from the newest checkpoint", e.what());
    return false;
  }
  record["replaced"] = std::move(replaced);
  record["survivors"] = std::move(survivor_records);
  record["agent_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  recoveries_.push_back(std::move(record));
  // A new spare loads libtorch (about half a core-second): started at once, it would compete
  // with the heal for this node's cores. The pool refills once the heal has had its moment.
  refill_spares_after_ = Clock::now() + kSpareRefillDelay;
  return true;
}

bool RunLoop::carry_in_process(std::vector<Worker>& workers, const std::vector<std::size_t>& lost, bool config_error,
                               const GenerationPlan& plan, int restart_count) {
  if (!may_recover_in_process(workers, lost, config_error, plan, restart_count)) return false;
  carried_ = std::move(workers);
  workers.clear();
  carried_generation_ = plan.generation;
  carried_world_ = plan.world_size;
  carried_store_endpoint_ = plan.store_endpoint;
  return true;
}

bool RunLoop::continue_in_process(std::vector<Worker>& workers, GenerationPlan& plan, int restart_count) {
  std::string why_not;
  const bool any_live = std::any_of(workers.begin(), workers.end(), [](Worker& w) { return !w.ended(); });
  const bool any_finished = std::any_of(workers.begin(), workers.end(), [](Worker& w) {
    return w.process && w.process->status() && w.process->status()->succeeded();
  });
  if (plan.world_size > carried_world_) {
    why_not = "the world grows from " + std::to_string(carried_world_) + " to " + std::to_string(plan.world_size) +
              " ranks, and new ranks start from a checkpoint";
  } else if (plan.store_endpoint != carried_store_endpoint_) {
    why_not = "the job's store moved to " + plan.store_endpoint + " (the rendezvous host was lost), and the "
              "workers' connections to the old one went with it";
  } else if (any_finished) {
    why_not = "a worker of this node already finished";
  }
  if (!why_not.empty()) {
    log_->warn("generation {} formed, but in-process recovery is not possible: {}; this node's workers restart from "
               "the newest checkpoint",
               plan.generation, why_not);
    return false;
  }
  const auto started = Clock::now();
  ++in_process_recoveries_;
  nlohmann::json record;
  record["lost_generation"] = carried_generation_;
  record["generation"] = plan.generation;
  record["world_size"] = plan.world_size;
  record["lost_world_size"] = carried_world_;
  nlohmann::json replaced = nlohmann::json::array();
  nlohmann::json survivor_records = nlohmann::json::array();
  std::vector<std::string> survivors;
  try {
    elastic::Store& store = recovery_store();
    declare_generation(store, carried_generation_, plan);
    for (Worker& w : workers) {
      const int old_rank = w.rank;
      w.rank = plan.rank_offset + w.local_rank;
      if (!w.ended()) {
        // Its wait in rejoin made no progress: the hang timeout starts again from now.
        std::error_code ec;
        if (!w.progress_file.empty() && std::filesystem::exists(w.progress_file, ec)) {
          std::filesystem::last_write_time(w.progress_file, std::filesystem::file_time_type::clock::now(), ec);
        }
        survivors.push_back("rank " + std::to_string(old_rank) + (old_rank == w.rank ? "" : " -> " + std::to_string(w.rank)) +
                            " pid " + std::to_string(w.process->pid()));
        survivor_records.push_back({{"rank", w.rank}, {"lost_rank", old_rank}, {"pid", w.process->pid()}});
        continue;
      }
      const pid_t old_pid = w.process ? w.process->pid() : -1;
      const std::string how = replace_worker(store, w, plan, restart_count);
      log_->warn("in-process recovery: rank {} (pid {}) is replaced by {} (pid {}) as rank {} of generation {}",
                 old_rank, old_pid, how, w.process->pid(), w.rank, plan.generation);
      replaced.push_back({{"rank", w.rank}, {"lost_pid", old_pid}, {"pid", w.process->pid()}, {"by", how}});
    }
  } catch (const Error& e) {
    log_->error("in-process recovery failed ({}); this node's workers restart from the newest checkpoint", e.what());
    return false;
  }
  log_->warn("in-process recovery: generation {} formed with {} (was {}); this node's workers keep their processes "
             "({}){}",
             plan.generation, plural(plan.world_size, "rank"), carried_world_,
             survivors.empty() ? std::string("none survived") : fmt::format("{}", fmt::join(survivors, ", ")),
             any_live ? " and heal from the job's memory" : "");
  record["replaced"] = std::move(replaced);
  record["survivors"] = std::move(survivor_records);
  record["agent_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  recoveries_.push_back(std::move(record));
  refill_spares_after_ = Clock::now() + kSpareRefillDelay;
  return true;
}

// `signal` to every worker's process group (also the groups of workers that already ended: their
// children may linger), up to `grace` for the workers to exit, then SIGKILL to every group, then
// reap. A second signal to the agent cuts the grace period short.
void RunLoop::stop_workers(std::vector<Worker>& workers, int signal, std::chrono::seconds grace) {
  int running = 0;
  for (Worker& w : workers) {
    if (!w.process) continue;
    if (!w.ended()) {
      w.stopped_by_agent = true;
      ++running;
    }
    w.process->signal_group(signal);
  }
  if (running > 0) {
    log_->info("stopping {}: {}, SIGKILL after {} s", plural(running, "remaining worker"), signal_name(signal),
               grace.count());
  }
  const auto deadline = Clock::now() + grace;
  const int signals_before = signals_.count();
  auto any_running = [&] {
    return std::any_of(workers.begin(), workers.end(), [](Worker& w) { return !w.ended(); });
  };
  while (any_running() && Clock::now() < deadline) {
    signals_.wait(kPollInterval);
    if (signals_.count() > std::max(signals_before, 1)) {
      log_->warn("second signal received; not waiting for the grace period");
      break;
    }
  }
  for (Worker& w : workers) {
    if (!w.process) continue;
    if (!w.ended()) {
      log_->warn("worker rank {} (pid {}) did not stop within {} s of {}; sending SIGKILL", w.rank,
                 w.process->pid(), grace.count(), signal_name(signal));
    }
    w.process->signal_group(SIGKILL);
  }
  for (Worker& w : workers) {
    if (w.process && !w.process->reap(WorkerProcess::kReapTimeout)) {
      log_->error("worker rank {} (pid {}) is still not gone after SIGKILL", w.rank,
                  w.process->pid());
    }
  }
}

GenerationRecord RunLoop::finish_record(int generation, Outcome outcome, std::vector<Worker>& workers,
                                        bool reap) {
  GenerationRecord record;
  record.generation = generation;
  record.outcome = outcome;
  for (Worker& w : workers) {
    nlohmann::json j;
    j["rank"] = w.rank;
    if (!w.process) {
      j["started"] = false;
      record.workers.push_back(std::move(j));
      continue;
    }
    if (reap) w.process->reap(WorkerProcess::kReapTimeout);
    j["started"] = true;
    j["pid"] = w.process->pid();
    j["stopped_by_agent"] = w.stopped_by_agent;
    if (const auto& status = w.process->status()) {
      j["status"] = status->describe();
      j["exit_code"] = status->kind() == ExitStatus::Kind::kExited ? nlohmann::json(status->code())
                                                                   : nlohmann::json(nullptr);
      j["signal"] = status->kind() == ExitStatus::Kind::kSignaled
                        ? nlohmann::json(signal_name(status->signal()))
                        : nlohmann::json(nullptr);
    }
    record.workers.push_back(std::move(j));
  }
  return record;
}

void RunLoop::write_summary(int exit_code, Outcome outcome, int restarts) {
  nlohmann::json summary;
  summary["outcome"] = outcome_name(outcome);
  summary["exit_code"] = exit_code;
  summary["generations"] = history_.size();
  summary["restarts"] = restarts;
  summary["recovery"] = options_.recovery == RecoveryMode::kInProcess ? "in-process" : "restart";
  summary["in_process_recoveries"] = recoveries_;
  summary["max_restarts"] = options_.max_restarts;
  summary["nproc_per_node"] = options_.nproc_per_node;
  summary["host"] = host_;
  summary["rdzv_endpoint"] = endpoint_;
  if (plan_) {
    summary["node_id"] = plan_->node_id;
    summary["nnodes"] = std::to_string(plan_->nodes.min) + ":" + std::to_string(plan_->nodes.max);
    summary["hosts_rendezvous"] = plan_->hosts_service;
    if (plan_->slurm) {
      summary["slurm_job_id"] = plan_->slurm->job_id;
      summary["slurm_node_id"] = plan_->slurm->node_id;
      summary["slurm_restart_count"] =
          plan_->slurm->restart_count ? nlohmann::json(*plan_->slurm->restart_count) : nlohmann::json(nullptr);
    }
  }
  summary["command"] = options_.command;
  nlohmann::json history = nlohmann::json::array();
  for (const GenerationRecord& g : history_) {
    nlohmann::json entry;
    entry["generation"] = g.generation;
    entry["master_port"] = g.master_port;
    entry["outcome"] = outcome_name(g.outcome);
    if (!g.reason.empty()) entry["reason"] = g.reason;
    entry["workers"] = g.workers;
    history.push_back(std::move(entry));
  }
  summary["history"] = std::move(history);
  const std::filesystem::path path = run_dir_ / "agent.json";
  try {
    files::atomic_write(path, summary.dump(2) + "\n");
    log_->info("run summary written to {}", path.string());
  } catch (const Error& e) {
    log_->error("could not write the run summary: {}", e.what());
  }
}

}  // namespace

const std::vector<std::string>& worker_env_names() {
  static const std::vector<std::string> names = {"RANK",
                                                 "LOCAL_RANK",
                                                 "WORLD_SIZE",
                                                 "LOCAL_WORLD_SIZE",
                                                 "GROUP_RANK",
                                                 "GROUP_WORLD_SIZE",
                                                 "ROLE_RANK",
                                                 "ROLE_WORLD_SIZE",
                                                 "ROLE_NAME",
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "TORCHELASTIC_RESTART_COUNT",
                                                 "TORCHELASTIC_MAX_RESTARTS",
                                                 "TORCHELASTIC_RUN_ID",
                                                 "TORCHELASTIC_USE_AGENT_STORE",
                                                 "TENAX_GENERATION",
                                                 "TENAX_RESTART_COUNT",
                                                 "TENAX_RDZV_ENDPOINT",
                                                 "TENAX_RUN_DIR",
                                                 "TENAX_RECOVERY",
                                                 elastic::kJobKeysVariable,
                                                 elastic::kFenceDirVariable,
                                                 elastic::kNodeIdVariable};
  return names;
}

std::vector<std::string> worker_environment(const std::vector<std::string>& inherited,
                                            const WorkerEnvironment& v) {
  if (v.master_port < 1 || v.master_port > 65535) {
    throw Error("MASTER_PORT for worker rank " + std::to_string(v.rank) + " is " + std::to_string(v.master_port) +
                ", not a port in 1..65535 (the agent of node rank 0 picks it)");
  }
  const std::set<std::string> ours(worker_env_names().begin(), worker_env_names().end());
  std::vector<std::string> env;
  env.reserve(inherited.size() + ours.size() + 1);
  bool nccl_error_handling = false;
  for (const std::string& entry : inherited) {
    const std::string name = entry.substr(0, entry.find('='));
    const bool per_process = name == kProgressFileEnv || name == elastic::kReplacementVariable ||
                             name == elastic::kSpareIdVariable;
    if (ours.count(name) == 0 && !per_process) env.push_back(entry);
    nccl_error_handling = nccl_error_handling || name == "TORCH_NCCL_ASYNC_ERROR_HANDLING";
  }
  auto put = [&env](const char* name, const std::string& value) {
    env.push_back(std::string(name) + "=" + value);
  };
  const std::string rank = std::to_string(v.rank);
  const std::string world = std::to_string(v.world_size);
  put("RANK", rank);
  put("LOCAL_RANK", v.local_rank < 0 ? rank : std::to_string(v.local_rank));
  put("WORLD_SIZE", world);
  put("LOCAL_WORLD_SIZE", v.local_world_size <= 0 ? world : std::to_string(v.local_world_size));
  put("GROUP_RANK", std::to_string(v.group_rank));
  put("GROUP_WORLD_SIZE", std::to_string(v.group_world_size));
  put("ROLE_RANK", rank);
  put("ROLE_WORLD_SIZE", world);
  put("ROLE_NAME", kWorkerRoleName);
  put("MASTER_ADDR", v.master_addr);
  put("MASTER_PORT", std::to_string(v.master_port));
  put("TORCHELASTIC_RESTART_COUNT", std::to_string(v.restart_count));
  put("TORCHELASTIC_MAX_RESTARTS", std::to_string(v.max_restarts));
  put("TORCHELASTIC_RUN_ID", v.run_id);
  // Python's str(False), as torchrun writes it: rank 0 hosts the store at MASTER_ADDR:MASTER_PORT
  // (the agent's store is Tenax's own, at TENAX_RDZV_ENDPOINT, which PyTorch cannot speak).
  put("TORCHELASTIC_USE_AGENT_STORE", "False");
  // torchrun's default, kept when the user set it: NCCL errors abort the collective (and the
  // worker) rather than hang it, so that the agent sees a failure and restarts the group.
  if (!nccl_error_handling) put("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  put("TENAX_GENERATION", std::to_string(v.generation));
  put("TENAX_RESTART_COUNT", std::to_string(v.restart_count));
  put("TENAX_RDZV_ENDPOINT", v.rdzv_endpoint);
  put("TENAX_RUN_DIR", v.run_dir);
  if (!v.progress_file.empty()) put(kProgressFileEnv, v.progress_file);
  if (!v.keys_file.empty()) put(elastic::kJobKeysVariable, v.keys_file);
  if (!v.fence_dir.empty()) put(elastic::kFenceDirVariable, v.fence_dir);
  put(elastic::kRecoveryVariable, v.recovery);
  if (v.replacement) put(elastic::kReplacementVariable, "1");
  if (v.spare_id >= 0) put(elastic::kSpareIdVariable, std::to_string(v.spare_id));
  put(elastic::kNodeIdVariable, v.node_id);
  return env;
}

int endpoint_port(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  const std::string digits = colon == std::string::npos ? "" : endpoint.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 ||
      digits.find_first_not_of("0123456789") != std::string::npos) {
    throw Error("rendezvous endpoint '" + endpoint + "' has no port");
  }
  const int port = std::stoi(digits);
  if (port < 1 || port > 65535) throw Error("rendezvous endpoint '" + endpoint + "' has no port");
  return port;
}

Agent::Agent(RunOptions options, elastic::KvService& service)
    : options_(std::move(options)), service_(&service) {}

Agent::Agent(RunOptions options, MultiNodePlan plan) : options_(std::move(options)), plan_(std::move(plan)) {}

int Agent::run() { return RunLoop(options_, service_, plan_ ? &*plan_ : nullptr).run(); }

}  // namespace tenax::launcher
