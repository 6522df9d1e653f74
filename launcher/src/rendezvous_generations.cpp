// Several nodes' generations (DESIGN.md decisions 9 and 14): one agent per node joins the
// rendezvous, which forms each generation; the service is found through the lease in the job's
// shared directory and hosted by whichever node the election names (host_election.h), so that
// the job outlives the node that hosted it. Waits are bounded (--join-timeout); a job that
// cannot form a generation under Slurm asks for a requeue rather than hold its allocation idle.
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "agent.h"
#include "exit_status.h"
#include "free_port.h"
#include "generation_claim.h"
#include "generation_source.h"
#include "slurm_requeue.h"
#include "tenax/core/endpoint.h"
#include "tenax/core/error.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/host_election.h"
#include "tenax/elastic/job_keys.h"
#include "tenax/elastic/rendezvous_client.h"
#include "tenax/elastic/rendezvous_lease.h"
#include "tenax/elastic/rendezvous_service.h"

namespace tenax::launcher {
namespace {

using Clock = std::chrono::steady_clock;

std::string plural(int n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class RendezvousGenerations final : public GenerationSource {
 public:
  RendezvousGenerations(const RunOptions& options, const MultiNodePlan& plan, std::filesystem::path keys_file,
                        std::filesystem::path run_dir, std::string host, ShutdownSignals& signals,
                        std::shared_ptr<spdlog::logger> log)
      : options_(options),
        plan_(plan),
        keys_file_(std::move(keys_file)),
        run_dir_(std::move(run_dir)),
        host_(std::move(host)),
        signals_(signals),
        log_(std::move(log)) {}

  ~RendezvousGenerations() override { close_service(); }

  std::variant<GenerationPlan, Stop> next(int /*restarts*/, const std::function<bool()>& local_work_done) override {
    if (!opened_) {
      opened_ = true;
      if (std::optional<Stop> stop = open()) return *stop;
    }
    std::optional<elastic::Assignment> assigned;
    Stop stop;
    if (!join_generation(assigned, stop, local_work_done)) return stop;
    const int generation = static_cast<int>(assigned->generation);
    last_generation_ = assigned->generation;
    last_node_rank_ = assigned->node_rank;
    // TENAX_RESTART_COUNT counts the job's re-formed generations, the same on every node.
    const elastic::Assignment& a = *assigned;
    return GenerationPlan{generation,    a.node_rank,      a.num_nodes,
                          a.rank_offset, a.world_size,     a.master_host,
                          a.master_port, a.store_endpoint, /*restart_count=*/generation};
  }

  Status watch() override {
    Status rdzv = client_->status();
    // The lease shows a dead or moved service sooner than the client's own service timeout.
    if (rdzv.is_ok()) {
      if (std::string moved = service_moved(); !moved.empty()) rdzv = Status(StatusCode::kUnavailable, moved);
    }
    return rdzv;
  }

  Status status() const override { return client_ ? client_->status() : Status::ok(); }

  void request_restart(const std::string& why) override {
    if (!client_) return;
    const Status asked = client_->request_restart(why);
    if (!asked.is_ok()) log_->warn("the rendezvous service did not confirm the restart: {}", asked.to_string());
  }

  std::optional<Stop> report(const Decision& decision, const GenerationPlan&) override {
    switch (decision.farewell) {
      case Farewell::kFinish:
        if (Status s = client_->finish(); !s.is_ok()) log_->warn("{}", s.to_string());
        wait_for_other_nodes();
        break;
      case Farewell::kLeave: leave(); break;
      case Farewell::kNone: break;
    }
    if (decision.find_service) {
      Stop stop;
      if (!locate_service(fmt::format("the rendezvous service at {} was lost", endpoint_), stop)) return stop;
    }
    return std::nullopt;
  }

  void close(const Stop& how) override {
    if (how.outcome == Outcome::kPreempted && how.exit_code == kExitPreempted) {
      // Before any generation formed, the node-list position stands in for the node rank.
      requeue_if_rank0(last_node_rank_ >= 0 ? last_node_rank_ : plan_.position);
    }
    close_service();
  }

  std::string endpoint() const override { return endpoint_; }

  void describe(nlohmann::json& summary) const override {
    summary["node_id"] = plan_.node_id;
    summary["nnodes"] = fmt::format("{}:{}", plan_.nodes.min, plan_.nodes.max);
    summary["hosts_rendezvous"] = plan_.hosts_service;
    if (plan_.slurm) {
      summary["slurm_job_id"] = plan_.slurm->job_id;
      summary["slurm_node_id"] = plan_.slurm->node_id;
      summary["slurm_restart_count"] =
          plan_.slurm->restart_count ? nlohmann::json(*plan_.slurm->restart_count) : nlohmann::json(nullptr);
    }
  }

 private:
  std::optional<Stop> open();
  bool join_generation(std::optional<elastic::Assignment>& assigned, Stop& stop,
                       const std::function<bool()>& local_work_done);
  bool locate_service(const std::string& why, Stop& stop);
  bool host_service(std::int64_t term, const std::string& reason);
  void connect_client(const std::string& endpoint);
  std::string service_moved();
  int give_up_waiting(const std::string& what);
  void wait_for_other_nodes();
  void requeue_if_rank0(int node_rank);
  // An agent that stops tells the rendezvous at once and forgets it: no reconnecting to a
  // service that may be gone (its client's reconnect loop ends with it).
  void leave() {
    if (!client_) return;
    // As long as the service takes to miss this node anyway: one that is gone (its host left
    // first) is not waited for, and the client and its reconnect loop end here.
    const auto patience = std::clamp<std::chrono::milliseconds>(heartbeat_.expiry(), std::chrono::milliseconds(200),
                                                                std::chrono::seconds(2));
    if (Status s = client_->leave(patience); !s.is_ok()) {
      log_->info("left the rendezvous without its acknowledgement ({}); it sees this node go when its heartbeats stop",
                 s.message());
    }
    client_.reset();
  }
  void close_service();

  const RunOptions& options_;
  const MultiNodePlan& plan_;
  std::filesystem::path keys_file_;
  std::filesystem::path run_dir_;
  std::string host_;
  ShutdownSignals& signals_;
  std::shared_ptr<spdlog::logger> log_;
  bool opened_ = false;
  int last_node_rank_ = -1;
  std::unique_ptr<elastic::RendezvousService> rdzv_service_;
  std::unique_ptr<elastic::LeaseKeeper> lease_keeper_;  // while this agent hosts the service
  std::unique_ptr<elastic::RendezvousClient> client_;
  std::optional<elastic::LeaseFile> lease_file_;
  std::optional<elastic::HostElection> election_;
  std::optional<elastic::JobKeys> keys_;
  elastic::HeartbeatOptions heartbeat_;
  std::int64_t last_generation_ = -1;  // carried by a new client's JOINs (failover)
  Clock::time_point next_lease_check_{};
  std::string endpoint_;
};

std::optional<Stop> RendezvousGenerations::open() {
  const MultiNodePlan& plan = plan_;
  const int n = options_.nproc_per_node;
  if (plan.slurm) {
    const SlurmJob& job = *plan.slurm;
    log_->info("Slurm job {}: node {} of {} ({}), task {}, SLURM_RESTART_COUNT={}", job.job_id, job.node_id,
               job.num_nodes, host_, job.proc_id,
               job.restart_count
                   ? fmt::format("{} (requeued {})", *job.restart_count, plural(*job.restart_count, "time"))
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
  election_.emplace(plan.node_id,
                    elastic::HostElectionOptions(plan.position, lease_timeout).stagger_step(heartbeat_.interval() * 2));
  log_->info("node {} on {}: {} per node, {}..{} node(s), rendezvous {} (lease {}, timeout {} ms{})", plan.node_id,
             host_, plural(n, "worker"), plan.nodes.min, plan.nodes.max,
             plan.may_host ? "found through the lease" : "at " + plan.connect_endpoint(), lease_file_->path().string(),
             lease_timeout.count(),
             plan.may_host ? fmt::format(", position {} in the failover order", plan.position)
                           : std::string(", never hosted here: --rdzv-host no"));
  Stop stop;
  if (!locate_service("starting", stop)) return stop;
  return std::nullopt;
}

// Joins the next generation in slices of one second, so that a signal, a moved service or the
// carried workers' end is acted on at once. A rendezvous service lost or moved meanwhile is found
// again.
bool RendezvousGenerations::join_generation(std::optional<elastic::Assignment>& assigned, Stop& stop,
                                            const std::function<bool()>& local_work_done) {
  auto started = Clock::now();
  // The service fails a round that lacks MIN nodes at --join-timeout; this bound only guards
  // against a service that accepts the joins but never answers.
  auto deadline = started + options_.join_timeout + std::chrono::seconds(30);
  log_->info("node {} joining the rendezvous at {} (needs {}..{} node(s), join timeout {} s)", plan_.node_id, endpoint_,
             plan_.nodes.min, plan_.nodes.max, options_.join_timeout.count());
  auto next_note = started + std::chrono::seconds(10);
  // Offered with every JOIN of this round; the generation's MASTER_PORT is node rank 0's offer, so
  // every node's workers get the same one, new for each generation (as torchrun's agent picks it).
  const int master_port = pick_free_port();
  const auto give_up = [&](const std::string& what) {
    stop.outcome = Outcome::kFailed;
    stop.why = what;
    stop.exit_code = give_up_waiting(what);
    if (stop.exit_code == kExitPreempted) stop.outcome = Outcome::kRequeued;
    return false;
  };
  while (true) {
    StatusOr<elastic::Assignment> joined = client_->join(std::chrono::seconds(1), master_port);
    if (joined.is_ok()) {
      assigned = joined.value();
      return true;
    }
    const Status& status = joined.status();
    if (local_work_done && local_work_done()) {
      // Before the round's own failure: a round that cannot form because the other nodes
      // finished too is the job's end, not a failure.
      const std::string why = fmt::format(
          "finished: the workers of node {} completed training while it waited for the next generation", plan_.node_id);
      log_->info("{}; leaving the rendezvous", why);
      leave();
      stop = {kExitDone, Outcome::kFinished, why};
      return false;
    }
    std::string moved = status.code() == StatusCode::kUnavailable ? status.message() : service_moved();
    if (!moved.empty()) {
      if (!locate_service(moved, stop)) return false;
      started = Clock::now();
      deadline = started + options_.join_timeout + std::chrono::seconds(30);
      continue;
    }
    if (status.code() == StatusCode::kAborted) {
      // The generation formed and ended before this agent started a worker (another node
      // re-joined or was lost meanwhile): nothing to stop, join the next one.
      log_->info("node {}: {} before its workers started; joining the next generation", plan_.node_id,
                 status.message());
    } else if (status.code() != StatusCode::kDeadlineExceeded) {
      return give_up(fmt::format("node {} could not join a generation: {}", plan_.node_id, status.message()));
    }
    if (const int sig = signals_.received(); sig != 0) {
      leave();
      if (plan_.slurm && sig == SIGUSR1) {
        // Slurm's preemption warning between generations: nothing to save, requeue all the same.
        log_->warn("received {} while joining; leaving the rendezvous; exiting {} so that the job is requeued",
                   signal_name(sig), kExitPreempted);
        stop = {kExitPreempted, Outcome::kPreempted, fmt::format("{} while joining: requeue", signal_name(sig))};
        return false;
      }
      log_->warn("received {} while joining; leaving the rendezvous; exiting {}", signal_name(sig),
                 exit_code_for_signal(sig));
      stop = {exit_code_for_signal(sig), Outcome::kInterrupted, fmt::format("{} while joining", signal_name(sig))};
      return false;
    }
    const auto now = Clock::now();
    if (now >= deadline) {
      return give_up(fmt::format("node {}: no generation formed within {} s of joining ({})", plan_.node_id,
                                 std::chrono::duration_cast<std::chrono::seconds>(now - started).count(),
                                 status.message()));
    }
    if (now >= next_note) {
      next_note = now + std::chrono::seconds(10);
      log_->info("still waiting for a generation to form: {}", status.message());
    }
  }
}

// A generation cannot form (too few nodes, or no rendezvous service) and waiting longer is
// pointless: under Slurm, ask for a requeue (exit 3) rather than hold the allocation idle;
// elsewhere exit 1. Returns the exit code.
int RendezvousGenerations::give_up_waiting(const std::string& what) {
  if (!plan_.slurm) {
    log_->error("{}; exiting 1 (start the missing nodes, or lower MIN with --nnodes, and run the job again)", what);
    return kExitFailure;
  }
  const SlurmJob& job = *plan_.slurm;
  // A cause that a requeue does not cure (a node that fails every time) must not requeue the
  // job forever.
  constexpr int kMaxRequeuesWithoutAGeneration = 3;
  if (job.restart_count.value_or(0) >= kMaxRequeuesWithoutAGeneration) {
    log_->error(
        "{}; Slurm job {} was already requeued {} times (SLURM_RESTART_COUNT); not again: exiting 1 (check "
        "the nodes of the allocation, or lower MIN with --nnodes, and resubmit)",
        what, job.job_id, *job.restart_count);
    return kExitFailure;
  }
  log_->error(
      "{}; asking Slurm to requeue job {} rather than hold its allocation idle (`scontrol requeue {}`); "
      "exiting {}",
      what, job.job_id, job.job_id, kExitPreempted);
  // The marker that makes the requeue once per run of the job lives in the job's shared
  // directory, so that of several agents giving up together one requeues.
  const RequeueResult r =
      requeue_job(job.job_id, job.restart_count.value_or(0), keys_file_.parent_path(), std::chrono::seconds(30));
  if (r.outcome == RequeueResult::Outcome::kFailed) {
    log_->error("{}; exiting 1", r.message);
    return kExitFailure;
  }
  log_->warn("{}", r.message);
  return kExitPreempted;
}

// The lease says the service this agent uses is gone (its holder stopped renewing) or moved
// (another node holds a newer term, or this node's own term was taken): the reason, else "".
std::string RendezvousGenerations::service_moved() {
  if (!election_) return "";
  const auto now = Clock::now();
  if (now < next_lease_check_) return "";
  next_lease_check_ = now + heartbeat_.interval();
  if (lease_keeper_ && lease_keeper_->deposed()) {
    // Another node took the lease over (this agent's renewals stopped for longer than the lease
    // timeout: paused, or cut off from the shared file system): its service is the job's now.
    log_->warn("node {} no longer holds the rendezvous lease; stopping its rendezvous service at {}", plan_.node_id,
               endpoint_);
    lease_keeper_.reset();
    if (rdzv_service_) rdzv_service_->stop();
    rdzv_service_.reset();
    return "this node's rendezvous lease was taken over by another node";
  }
  election_->observe(lease_file_->read(), now, unix_ms());
  const elastic::HostElection::Decision d = election_->decide(now);
  if (d.action == elastic::HostElection::Action::kConnect && d.lease.endpoint != endpoint_) {
    return fmt::format("the rendezvous service moved to {} ({})", d.lease.endpoint, d.reason);
  }
  if (d.action == elastic::HostElection::Action::kClaim && plan_.may_host && !lease_keeper_) return d.reason;
  return "";
}

// Finds the job's rendezvous service through the lease in the job's directory, or hosts it when
// the election says so; connects client_ to it. False (with `stop` set) when none answers within
// --join-timeout, or on a signal.
bool RendezvousGenerations::locate_service(const std::string& why, Stop& stop) {
  const MultiNodePlan& plan = plan_;
  const auto started = Clock::now();
  if (client_) log_->warn("{}; looking for the job's rendezvous service in {}", why, lease_file_->path().string());
  auto next_note = started + std::chrono::seconds(5);
  while (true) {
    const auto now = Clock::now();
    election_->observe(lease_file_->read(), now, unix_ms());
    const elastic::HostElection::Decision d = election_->decide(now);
    if (d.action == elastic::HostElection::Action::kConnect) {
      const bool same =
          d.lease.endpoint == endpoint_ && client_ && client_->status().code() != StatusCode::kUnavailable;
      if (!same) {
        log_->info("rendezvous service at {}: {}", d.lease.endpoint, d.reason);
        connect_client(d.lease.endpoint);
      }
      return true;
    }
    if (!plan.may_host && !election_->lease()) {
      // Stand-alone `tenax rdzv` without a lease yet (or an older one): the given endpoint.
      if (endpoint_ != plan.connect_endpoint() || !client_ || client_->status().code() == StatusCode::kUnavailable) {
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
      stop = {exit_code_for_signal(sig), Outcome::kInterrupted,
              fmt::format("{} while looking for the rendezvous service", signal_name(sig))};
      return false;
    }
    if (now - started >= options_.join_timeout) {
      stop.outcome = Outcome::kRendezvousLost;
      stop.exit_code = give_up_waiting(
          fmt::format("node {}: no rendezvous service found within the join timeout of {} s ({}; last: {})",
                      plan.node_id, options_.join_timeout.count(), why, d.reason));
      if (stop.exit_code == kExitPreempted) stop.outcome = Outcome::kRequeued;
      return false;
    }
    if (now >= next_note) {
      next_note = now + std::chrono::seconds(5);
      log_->info("still looking for the rendezvous service: {}", d.reason);
    }
    signals_.wait(std::min<std::chrono::milliseconds>(heartbeat_.interval(), std::chrono::milliseconds(200)));
  }
}

// Hosts the service for `term`: binds, claims the term in the lease; false if another node
// claimed it first.
bool RendezvousGenerations::host_service(std::int64_t term, const std::string& reason) {
  const MultiNodePlan& plan = plan_;
  lease_keeper_.reset();
  if (rdzv_service_) rdzv_service_->stop();
  const elastic::GenerationFence fence(keys_file_.parent_path());
  const StatusOr<std::int64_t> fenced = fence.current();
  const std::int64_t above =
      std::max({election_->highest_generation(), last_generation_, fenced.is_ok() ? fenced.value() : std::int64_t{-1}});
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
    const Endpoint bound = Endpoint::parse(service->start(Endpoint{loopback ? "127.0.0.1" : "*", 0}.str()));
    endpoint = bound.with_host(plan.host).str();
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

void RendezvousGenerations::connect_client(const std::string& endpoint) {
  client_.reset();
  // The service must be silent for much longer than a heartbeat expiry before a node gives up
  // on it: a busy host, or the hosting agent stopping its own workers, is not a lost service.
  // A host that is really gone shows sooner, through its lease (service_moved()).
  const auto service_timeout = std::max<std::chrono::milliseconds>(std::chrono::seconds(30), heartbeat_.expiry() * 4);
  client_ = std::make_unique<elastic::RendezvousClient>(
      endpoint,
      elastic::RendezvousClientOptions(plan_.node_id, host_, options_.nproc_per_node)
          .heartbeat(heartbeat_)
          .reconnect_backoff_max(std::max<std::chrono::milliseconds>(heartbeat_.interval(), std::chrono::seconds(4)))
          .service_timeout(service_timeout)
          .keys(*keys_)
          .last_generation(last_generation_));
  endpoint_ = endpoint;
}

// The hosting agent stays until no other node is left that needs its service.
void RendezvousGenerations::wait_for_other_nodes() {
  if (!rdzv_service_) return;
  const int signals_before = signals_.count();
  auto next_note = Clock::now();
  while (true) {
    const elastic::RendezvousSnapshot snapshot = rdzv_service_->snapshot();
    if (snapshot.live.empty()) return;
    if (Clock::now() >= next_note) {
      log_->info("this agent hosts the rendezvous service: waiting for {} ({}) to finish before stopping it",
                 plural(static_cast<int>(snapshot.live.size()), "other node"), fmt::join(snapshot.live, ", "));
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

void RendezvousGenerations::requeue_if_rank0(int node_rank) {
  if (!plan_.slurm) {
    log_->info("not under Slurm: resubmit the job to resume from its checkpoint");
    return;
  }
  const SlurmJob& job = *plan_.slurm;
  if (node_rank != 0) {
    log_->info("node rank {}: the agent of node rank 0 requeues Slurm job {}", node_rank, job.job_id);
    return;
  }
  log_->warn(
      "requeueing Slurm job {} (preempted; SLURM_RESTART_COUNT={}): running `scontrol requeue {}`; Slurm "
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

void RendezvousGenerations::close_service() {
  client_.reset();
  if (rdzv_service_) {
    const elastic::RendezvousSnapshot last = rdzv_service_->snapshot();
    log_->info(
        "rendezvous service: the longest silence of a live node was {} ms (a node is declared dead after "
        "{} ms = {} ms x {})",
        last.longest_silence_ms, heartbeat_.expiry().count(), heartbeat_.interval().count(), heartbeat_.liveness());
    rdzv_service_->stop();
  }
  // The keeper's thread asks the service for its generation at every renewal: it is joined
  // (release) before the service is destroyed. The other way round, a renewal during the
  // teardown read a freed service (an agent that finished crashed with SIGSEGV, once in CI).
  // Released only once the service stopped, so that no node claims the lease while it serves.
  if (lease_keeper_) lease_keeper_->release();
  lease_keeper_.reset();
  rdzv_service_.reset();
}

}  // namespace

std::unique_ptr<GenerationSource> rendezvous_generations(const RunOptions& options, const MultiNodePlan& plan,
                                                         const std::filesystem::path& keys_file,
                                                         const std::filesystem::path& run_dir, std::string host,
                                                         ShutdownSignals& signals,
                                                         std::shared_ptr<spdlog::logger> log) {
  return std::make_unique<RendezvousGenerations>(options, plan, keys_file, run_dir, std::move(host), signals,
                                                 std::move(log));
}

}  // namespace tenax::launcher
