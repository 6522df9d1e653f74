#include "agent.h"

#include <unistd.h>

#include <algorithm>
#include <thread>
#include <csignal>
#include <filesystem>
#include <optional>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "exit_status.h"
#include "generation_claim.h"
#include "generation_source.h"
#include "recovery_coordinator.h"
#include "run_decision.h"
#include "run_summary.h"
#include "shutdown_signals.h"
#include "tenax/core/endpoint.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/job_keys.h"
#include "worker_group.h"

extern char** environ;

namespace tenax::launcher {
namespace {

using Clock = std::chrono::steady_clock;

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
        !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") ==
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

std::string plural(int n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

// Losses that come together (two kills by one hand, the ranks behind one switch port) are judged
// as one: a worker already being killed when another is found dead is waited for (it is ending)
// and counted in the same loss, rather than found a poll later, after the first one's recovery.
void gather_dying_workers(WorkerGroup& group, WorkerEvents& events, spdlog::logger& log, const std::string& host) {
  for (std::size_t i = 0; i < group.workers().size(); ++i) {
    Worker& w = group.workers()[i];
    if (!w.process || w.process->status() || !w.process->dying()) continue;
    if (std::find(events.lost.begin(), events.lost.end(), i) != events.lost.end()) continue;
    const auto deadline = Clock::now() + std::chrono::seconds(2);
    while (!w.process->poll() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    log.error("worker rank {} (pid {}, host {}) was being killed at the same moment: one loss of both", w.rank,
              w.process->pid(), host);
    events.lost.push_back(i);
  }
}

std::vector<std::string> current_environment() {
  std::vector<std::string> out;
  for (char** e = environ; e && *e; ++e) out.emplace_back(*e);
  return out;
}

// One loop for one node and many: next generation → run it → decide → report.
class RunLoop {
 public:
  RunLoop(const RunOptions& options, elastic::KvService* service, const MultiNodePlan* plan)
      : options_(options),
        service_(service),
        plan_(plan),
        log_(logger("tenax.launcher")),
        host_(plan ? plan->host : hostname()) {}

  int run();

 private:
  bool multi_node() const { return plan_ != nullptr; }
  // Starts the workers, watches them and the rendezvous until the generation ends; a loss that
  // the recovery policy allows is healed in process on the way (one node: at once; across
  // nodes: the workers are carried into the generation the rendezvous forms next).
  GenerationRecord run_generation(GenerationPlan plan, int restarts);
  // This node's workers of `plan`: those carried from the last generation when they can go on
  // in it, else new ones (the spares too). Empty when one could not be started (logged, the
  // restart asked for).
  std::optional<WorkerGroup> start_group(const GenerationPlan& plan);
  GenerationRecord end_generation(int generation, Outcome outcome, WorkerGroup& group, bool reap = true,
                                  std::string reason = {});
  void set_identity(int generation) {
    LogIdentity identity;
    identity.rank = -1;
    identity.generation = generation;
    // Multi-node: several agents write to one job log (srun), so each line names its host.
    identity.role = plan_ ? "agent@" + host_ : "agent";
    set_log_identity(identity);
  }

  const RunOptions& options_;
  elastic::KvService* service_;  // single node
  const MultiNodePlan* plan_;    // multi-node
  std::shared_ptr<spdlog::logger> log_;
  std::string host_;
  JobEnvironment job_;
  ShutdownSignals signals_;
  std::unique_ptr<GenerationSource> source_;
  std::unique_ptr<RecoveryCoordinator> recovery_;
  Clock::time_point next_hang_check_{};
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
    throw ConfigError(
        fmt::format("tenax run: cannot create run directory '{}': {}; pass --run-dir with a writable "
                    "directory",
                    dir, ec.message()));
  }
  job_.options = &options_;
  job_.multi_node = multi_node();
  job_.run_id = !options_.rdzv_id.empty() ? options_.rdzv_id
                : plan_ && plan_->slurm   ? plan_->slurm->job_id
                                          : std::string("none");
  job_.run_dir = std::filesystem::absolute(dir).lexically_normal();
  job_.keys_file = std::filesystem::absolute(job_keys_path(options_)).lexically_normal();
  job_.node_id = plan_ ? plan_->node_id : "local";
  job_.inherited = current_environment();
  source_ = plan_ ? rendezvous_generations(options_, *plan_, job_.keys_file, job_.run_dir, host_, signals_, log_)
                  : local_generations(options_, *service_, job_.keys_file.parent_path(), log_);
  recovery_ = std::make_unique<RecoveryCoordinator>(options_, job_, multi_node(), log_);
  set_identity(0);

  RunSummary summary;
  summary.host = host_;
  Stop stop;
  int restarts = 0;
  for (;;) {
    std::variant<GenerationPlan, Stop> next = source_->next(restarts, [this] { return recovery_->carried_finished(); });
    if (const Stop* s = std::get_if<Stop>(&next)) {
      stop = *s;
      break;
    }
    const GenerationPlan plan = std::get<GenerationPlan>(next);
    set_identity(plan.generation);
    if (multi_node() && restarts > 0) {
      log_->warn("generation {} formed: {} node(s), world size {}; this node runs ranks {}..{} (restart {} of {})",
                 plan.generation, plan.num_nodes, plan.world_size, plan.rank_offset,
                 plan.rank_offset + options_.nproc_per_node - 1, restarts, options_.max_restarts);
    }
    GenerationRecord record = run_generation(plan, restarts);
    record.master_port = plan.master_port;
    GenerationFacts facts;
    facts.outcome = record.outcome;
    facts.signal = signals_.received();
    facts.restarts = restarts;
    facts.charged = recovery_->take_charge();
    facts.healed_events = recovery_->healed_events();
    facts.max_restarts = options_.max_restarts;
    facts.generation = plan.generation;
    facts.workers = options_.nproc_per_node;
    facts.multi_node = multi_node();
    facts.slurm = plan_ && plan_->slurm;
    facts.node_id = job_.node_id;
    summary.history.push_back(std::move(record));
    const Decision decision = decide_after_generation(facts);
    stop = {decision.exit_code, decision.outcome, {}};
    // The reason for an exit is the decision's last warning or error.
    for (const LogLine& line : decision.log) {
      if (line.level != LogLine::Level::kInfo) stop.why = line.text;
    }
    restarts = decision.restarts;
    if (decision.action == RunAction::kRestart && !multi_node()) set_identity(plan.generation + 1);
    for (const LogLine& line : decision.log) {
      switch (line.level) {
        case LogLine::Level::kInfo: log_->info("{}", line.text); break;
        case LogLine::Level::kWarn: log_->warn("{}", line.text); break;
        case LogLine::Level::kError: log_->error("{}", line.text); break;
      }
    }
    if (std::optional<Stop> failed = source_->report(decision, plan)) {
      stop = *failed;
      break;
    }
    if (decision.action == RunAction::kExit) break;
  }
  recovery_->stop();
  summary.outcome = stop.outcome;
  summary.exit_code = stop.exit_code;
  summary.restarts = restarts;
  summary.recoveries = recovery_->records();
  summary.endpoint = source_->endpoint();
  nlohmann::json nodes = nlohmann::json::object();
  source_->describe(nodes);
  write_run_summary(job_.run_dir, summarize_run(options_, summary, nodes), *log_);
  source_->close(stop);
  // The last line says how the agent ends and why, whatever was logged on the way out.
  const std::string why = stop.why.empty() ? outcome_name(stop.outcome) : stop.why;
  if (stop.exit_code == kExitDone) {
    log_->info("tenax run exits {}: {}", stop.exit_code, why);
  } else if (stop.exit_code == kExitPreempted) {
    log_->warn("tenax run exits {}: {}", stop.exit_code, why);
  } else {
    log_->error("tenax run exits {}: {}", stop.exit_code, why);
  }
  return stop.exit_code;
}

std::optional<WorkerGroup> RunLoop::start_group(const GenerationPlan& plan) {
  const int n = options_.nproc_per_node;
  if (recovery_->carrying()) {
    auto [carried, from] = recovery_->take_carried();
    if (recovery_->recover(carried, plan, from)) return std::move(carried);
    carried.stop_for_restart();
    recovery_->drop_spares();
  }
  if (plan_) {
    log_->info("starting {} (generation {}, node rank {} of {}, ranks {}..{} of {}): {}", plural(n, "worker"),
               plan.generation, plan.node_rank, plan.num_nodes, plan.rank_offset, plan.rank_offset + n - 1,
               plan.world_size, shell_words(options_.command));
  } else {
    log_->info("starting {} (generation {}): {}", plural(n, "worker"), plan.generation, shell_words(options_.command));
  }
  // Across nodes under in-process recovery every worker starts as a replacement: it heals from
  // whichever workers of the generation hold state (another node's survivors), and when none
  // does, every rank of it restores from disk together. So no node needs to know what the
  // others did with their workers: each generation has one way to start, the same everywhere.
  const bool as_replacements = multi_node() && recovery_->enabled();
  if (as_replacements) {
    try {
      recovery_->declare_generation(plan.generation - 1, plan);
    } catch (const Error& e) {
      log_->error("cannot declare generation {} to the workers ({}); the job cannot start", plan.generation, e.what());
      source_->request_restart(fmt::format("node {} could not reach the job's store", job_.node_id));
      return std::nullopt;
    }
  }
  WorkerGroup group(options_, host_, job_.node_id, multi_node(), signals_, log_);
  std::string failure;
  if (!group.start(plan, job_, as_replacements, failure)) {
    source_->request_restart(failure);
    return std::nullopt;
  }
  recovery_->started(plan);
  return group;
}

GenerationRecord RunLoop::end_generation(int generation, Outcome outcome, WorkerGroup& group, bool reap,
                                         std::string reason) {
  GenerationRecord record;
  record.generation = generation;
  record.outcome = outcome;
  record.reason = std::move(reason);
  record.workers = group.record(reap);
  return record;
}

GenerationRecord RunLoop::run_generation(GenerationPlan plan, int restarts) {
  const int n = options_.nproc_per_node;
  recovery_->use_store(plan.store_endpoint);
  std::optional<WorkerGroup> started = start_group(plan);
  if (!started) {
    GenerationRecord record;
    record.generation = plan.generation;
    return record;
  }
  WorkerGroup& group = *started;
  // The spares outlive this generation only with the workers that are carried into the next.
  struct SparesGuard {
    RecoveryCoordinator& recovery;
    ~SparesGuard() {
      if (!recovery.carrying()) recovery.drop_spares();
    }
  } spares_guard{*recovery_};
  const int first_restart_count = plan.restart_count;
  std::optional<Clock::time_point> preempt_deadline;
  for (;;) {
    // A worker's exit does not wake the agent (no SIGCHLD handler): it is seen within this interval.
    if (int sig = signals_.wait(options_.monitor_interval); sig != 0) {
      // Preemption (Slurm's warning signal, scancel, Ctrl-C): the workers are asked to save
      // and exit 3, not killed. SIGUSR1 is passed on as it is; SIGINT/SIGTERM as SIGTERM.
      const int forward = sig == SIGUSR1 ? SIGUSR1 : SIGTERM;
      log_->warn(
          "received {}; forwarding {} to {} so that they checkpoint and exit {} "
          "(SIGKILL after {} s; a second signal cuts the wait short)",
          signal_name(sig), signal_name(forward), plural(n, "worker"), kExitPreempted, options_.preempt_grace.count());
      group.stop(forward, options_.preempt_grace);
      return end_generation(plan.generation,
                            group.all_saved_and_preempted() ? Outcome::kPreempted : Outcome::kInterrupted, group);
    }
    recovery_->tend_spares();
    const bool check_hangs = options_.hang_timeout.count() > 0 && Clock::now() >= next_hang_check_;
    if (check_hangs) next_hang_check_ = Clock::now() + std::chrono::seconds(1);
    WorkerEvents events = group.poll(check_hangs, recovery_->enabled());
    if (events.failed && recovery_->enabled()) gather_dying_workers(group, events, *log_, host_);
    if (events.preempted && !preempt_deadline) preempt_deadline = Clock::now() + options_.grace_period;
    if (events.failed && !preempt_deadline &&
        recovery_->may_recover(group, events.lost, events.config_error, plan, restarts)) {
      if (multi_node()) {
        // The other nodes' workers keep theirs too: the rendezvous ends this generation for all.
        source_->request_restart(events.failure);
        GenerationRecord record =
            end_generation(plan.generation, Outcome::kRendezvousRestart, group, /*reap=*/false, events.failure);
        recovery_->carry(std::move(group), plan);
        return record;
      }
      GenerationPlan next = plan;
      next.generation = static_cast<int>(
          advance_fence_from(elastic::GenerationFence(job_.keys_file.parent_path()), plan.generation + 1));
      next.restart_count = first_restart_count + recovery_->recoveries() + 1;
      set_identity(next.generation);
      if (recovery_->recover(group, next, {plan.generation, plan.world_size, plan.store_endpoint})) {
        plan = next;
        continue;
      }
    }
    if (events.failed) {
      if (multi_node() && !events.config_error) {
        if (const Status ended = source_->status(); !ended.is_ok()) {
          log_->info("(the rendezvous had already ended generation {}: {})", plan.generation, ended.message());
        }
        log_->warn("asking every node to restart: {}; stopping the other local workers, then joining generation {}",
                   events.failure, plan.generation + 1);
        source_->request_restart(events.failure);
      }
      group.stop_for_restart();
      return end_generation(plan.generation, events.config_error ? Outcome::kConfigError : Outcome::kFailed, group);
    }
    if (events.all_ended) {
      return end_generation(plan.generation, group.any_preempted() ? Outcome::kPreempted : Outcome::kFinished, group);
    }
    if (multi_node() && !preempt_deadline) {
      if (const Status rdzv = source_->watch(); !rdzv.is_ok()) {
        const bool lost = rdzv.code() != StatusCode::kAborted;
        if (lost) {
          log_->error("{}; stopping the {} local {} (they cannot go on without a rendezvous; finding it again)",
                      rdzv.message(), n, n == 1 ? "worker" : "workers");
        } else if (recovery_->enabled() && recovery_->may_recover(group, {}, false, plan, restarts)) {
          log_->warn("{}; the local workers of node {} keep their processes and wait for the next generation",
                     rdzv.message(), job_.node_id);
          GenerationRecord record =
              end_generation(plan.generation, Outcome::kRendezvousRestart, group, /*reap=*/false, rdzv.message());
          recovery_->carry(std::move(group), plan);
          return record;
        } else {
          log_->warn("{}; stopping the local workers of node {} and joining the next generation", rdzv.message(),
                     job_.node_id);
        }
        group.stop_for_restart();
        return end_generation(plan.generation, lost ? Outcome::kRendezvousLost : Outcome::kRendezvousRestart, group,
                              true, rdzv.message());
      }
    }
    if (preempt_deadline && Clock::now() >= *preempt_deadline) {
      for (Worker& w : group.workers()) {
        if (w.process->status()) continue;
        log_->error(
            "worker rank {} (pid {}, host {}) was still running {} s after another worker was preempted; "
            "treating generation {} as failed",
            w.rank, w.process->pid(), host_, options_.grace_period.count(), plan.generation);
      }
      group.stop_for_restart();
      return end_generation(plan.generation, Outcome::kFailed, group);
    }
  }
}

}  // namespace

int endpoint_port(const std::string& endpoint) { return Endpoint::parse(endpoint).port; }

Agent::Agent(RunOptions options, elastic::KvService& service) : options_(std::move(options)), service_(&service) {}

Agent::Agent(RunOptions options, MultiNodePlan plan) : options_(std::move(options)), plan_(std::move(plan)) {}

int Agent::run() { return RunLoop(options_, service_, plan_ ? &*plan_ : nullptr).run(); }

}  // namespace tenax::launcher
