#include "recovery_coordinator.h"

#include <algorithm>
#include <csignal>
#include <filesystem>

#include <fmt/format.h>

#include "tenax/core/error.h"
#include "tenax/elastic/in_process_recovery.h"
#include "tenax/elastic/job_keys.h"
#include "tenax/elastic/kv_service.h"

namespace tenax::launcher {
namespace {

using Clock = std::chrono::steady_clock;

// After an in-process recovery, how long the agent waits before it starts a new warm spare: a
// new spare loads libtorch (about half a core-second), which would compete with the heal.
constexpr std::chrono::seconds kSpareRefillDelay{2};

}  // namespace

RecoveryCoordinator::RecoveryCoordinator(const RunOptions& options, const JobEnvironment& job, bool multi_node,
                                         std::shared_ptr<spdlog::logger> log)
    : options_(options),
      job_(job),
      multi_node_(multi_node),
      log_(std::move(log)),
      machine_(options.recovery, options.max_restarts, multi_node, kSpareRefillDelay) {}

RecoveryCoordinator::~RecoveryCoordinator() = default;

elastic::Store& RecoveryCoordinator::store() {
  if (store_ && connected_endpoint_ != store_endpoint_) store_.reset();
  if (!store_) {
    std::optional<elastic::JobKeys> keys;
    if (std::filesystem::exists(job_.keys_file)) keys = elastic::read_job_keys(job_.keys_file);
    store_ = elastic::connect_store(store_endpoint_, std::chrono::seconds(10), keys);
    connected_endpoint_ = store_endpoint_;
  }
  return *store_;
}

std::filesystem::path RecoveryCoordinator::spare_progress_file(int spare_id) const {
  return job_.run_dir / "progress" / ("spare-" + std::to_string(spare_id));
}

void RecoveryCoordinator::started(const GenerationPlan& plan) {
  machine_.started();
  // Warm spares start after the workers, so that they never delay the job's own start.
  spares_.reset();
  if (!enabled() || options_.spares <= 0) return;
  spares_.emplace(
      options_.spares,
      [this, plan](int id) {
        WorkerEnvironment values = job_.for_worker(plan, 0);
        // A file of its own, which it writes only once it trains in a lost rank's place: a
        // waiting spare is never judged, a spare at work is, like any worker (--hang-timeout).
        if (!values.progress_file.empty()) {
          values.progress_file = spare_progress_file(id).string();
          std::error_code ec;
          std::filesystem::remove(values.progress_file, ec);  // a stale one from an earlier spare
        }
        values.spare_id = id;
        return WorkerProcess::spawn(options_.command, job_.environ_for(values));
      },
      &next_spare_id_, log_);
  spares_->fill();
}

void RecoveryCoordinator::tend_spares() {
  if (!spares_) return;
  spares_->poll();
  if (machine_.may_refill_spares(Clock::now())) spares_->fill();
}

void RecoveryCoordinator::declare_generation(int lost_generation, const GenerationPlan& next) {
  elastic::Store& s = store();
  auto put = [&s](const std::string& key, const std::string& value) {
    s.set(key, std::vector<char>(value.begin(), value.end()));
  };
  // The layout first: a survivor that sees the declaration reads it at once.
  put(elastic::layout_key(next.generation, job_.node_id),
      elastic::format_node_layout({next.rank_offset, next.world_size}));
  const std::string number = std::to_string(next.generation);
  put(elastic::kLatestKey, number);
  // Survivors wait for the generation after theirs; across nodes the rendezvous may have
  // numbered the new one further on.
  for (int g = lost_generation + 1; g <= next.generation; ++g) put(elastic::declared_key(g), number);
  s.add(elastic::generation_prefix(lost_generation) + elastic::kSupersededKey, 1);
}

Loss RecoveryCoordinator::loss_seen(WorkerGroup& group, const std::vector<std::size_t>& lost, bool config_error,
                                    const GenerationPlan& plan, int restarts) {
  Loss loss;
  loss.generation = plan.generation;
  loss.world_size = plan.world_size;
  loss.lost = static_cast<int>(lost.size());
  loss.config_error = config_error;
  loss.restarts = restarts;
  loss.ready = store().add(elastic::ready_key(plan.generation), 0);
  loss.survivors = 0;
  const std::vector<Worker>& workers = group.workers();
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (std::find(lost.begin(), lost.end(), i) != lost.end()) continue;
    ++loss.survivors;
    loss.unhealed_survivors += workers[i].unhealed_replacement ? 1 : 0;
  }
  return loss;
}

bool RecoveryCoordinator::may_recover(WorkerGroup& group, const std::vector<std::size_t>& lost, bool config_error,
                                      const GenerationPlan& plan, int restarts) {
  if (!enabled()) return false;
  Loss loss;
  try {
    loss = loss_seen(group, lost, config_error, plan, restarts);
  } catch (const Error& e) {
    log_->warn("cannot read which workers heal in process ({}); restarting instead", e.what());
    return false;
  }
  const RecoveryVerdict verdict = machine_.lost(loss);
  if (machine_.healed_in(plan.generation)) {
    for (Worker& w : group.workers()) w.unhealed_replacement = false;  // every rank healed
  }
  if (verdict.same_event) {
    log_->warn(
        "a loss while generation {} heals the last one: the same fault event ({} losses; not charged to "
        "--max-restarts again)",
        plan.generation, verdict.event_losses);
  }
  if (!verdict.heal) {
    log_->warn("in-process recovery is not possible: {}; every worker restarts from the newest checkpoint",
               verdict.why_not);
    return false;
  }
  // A hung worker is killed, not waited on: its peers' connections to it close, which wakes them.
  for (std::size_t i : lost) {
    Worker& w = group.workers()[i];
    if (!w.process->status()) w.process->signal_group(SIGKILL);
    w.process->reap(WorkerProcess::kReapTimeout);
  }
  return true;
}

std::string RecoveryCoordinator::replace_worker(Worker& w, const GenerationPlan& plan) {
  std::error_code ec;
  if (!w.progress_file.empty()) std::filesystem::remove(w.progress_file, ec);  // the lost worker's
  std::string how;
  if (std::optional<Spare> spare = spares_ ? spares_->take() : std::nullopt) {
    const std::string assignment =
        elastic::format_spare_assignment({w.local_rank, plan.generation, plan.restart_count});
    store().set(elastic::spare_key(job_.node_id, spare->id), std::vector<char>(assignment.begin(), assignment.end()));
    w.process.emplace(std::move(spare->process));
    if (!w.progress_file.empty()) w.progress_file = spare_progress_file(spare->id);
    how = fmt::format("warm spare {}", spare->id);
  } else {
    WorkerEnvironment values = job_.for_worker(plan, w.local_rank);
    values.replacement = true;
    // The slot's file may be a warm spare's that held it before: judge the one this process writes.
    w.progress_file = values.progress_file;
    w.process.emplace(WorkerProcess::spawn(options_.command, job_.environ_for(values)));
    how = "a new process";
  }
  w.stopped_by_agent = false;
  w.unhealed_replacement = true;
  return how;
}

bool RecoveryCoordinator::recover(WorkerGroup& group, const GenerationPlan& plan, const PreviousGeneration& from) {
  Formation formation;
  formation.generation = plan.generation;
  formation.world_size = plan.world_size;
  formation.previous_world_size = from.world_size;
  if (plan.store_endpoint != from.store_endpoint) formation.store_moved_to = plan.store_endpoint;
  formation.worker_finished = group.any_succeeded();
  formation.holders_alive = static_cast<int>(std::count_if(
      group.workers().begin(), group.workers().end(), [](Worker& w) { return !w.ended() && !w.unhealed_replacement; }));
  const RecoveryVerdict verdict = machine_.formed(formation, Clock::now());
  if (!verdict.heal) {
    log_->warn(
        "generation {} formed, but in-process recovery is not possible: {}; this node's workers restart from "
        "the newest checkpoint",
        plan.generation, verdict.why_not);
    return false;
  }
  const auto started = Clock::now();
  ++recoveries_;
  nlohmann::json record;
  record["lost_generation"] = from.generation;
  record["generation"] = plan.generation;
  record["world_size"] = plan.world_size;
  record["lost_world_size"] = from.world_size;
  nlohmann::json replaced = nlohmann::json::array();
  nlohmann::json survivor_records = nlohmann::json::array();
  std::vector<std::string> survivors;
  bool any_live = false;
  try {
    // Declared before any replacement exists: survivors may already be waiting for it.
    declare_generation(from.generation, plan);
    for (Worker& w : group.workers()) {
      const int old_rank = w.rank;
      w.rank = plan.rank_offset + w.local_rank;
      if (w.ended()) continue;
      any_live = true;
      // Its wait for the new generation made no progress: the hang timeout starts again from now.
      std::error_code ec;
      if (!w.progress_file.empty() && std::filesystem::exists(w.progress_file, ec)) {
        std::filesystem::last_write_time(w.progress_file, std::filesystem::file_time_type::clock::now(), ec);
      }
      survivors.push_back(fmt::format("rank {}{} pid {}", old_rank,
                                      old_rank == w.rank ? std::string() : fmt::format(" -> {}", w.rank),
                                      w.process->pid()));
      survivor_records.push_back({{"rank", w.rank}, {"lost_rank", old_rank}, {"pid", w.process->pid()}});
    }
    for (Worker& w : group.workers()) {
      if (!w.ended()) continue;
      const pid_t old_pid = w.process ? w.process->pid() : -1;
      const std::string how = replace_worker(w, plan);
      log_->warn(
          "in-process recovery: rank {} (pid {}) is replaced by {} (pid {}) in generation {}; the other "
          "workers keep their processes and heal it from the job's memory",
          w.rank, old_pid, how, w.process->pid(), plan.generation);
      replaced.push_back({{"rank", w.rank}, {"lost_pid", old_pid}, {"pid", w.process->pid()}, {"by", how}});
    }
  } catch (const Error& e) {
    machine_.heal_abandoned();
    log_->error("in-process recovery failed ({}); this node's workers restart from the newest checkpoint", e.what());
    return false;
  }
  log_->warn(
      "in-process recovery: generation {} formed with {} rank{} (was {}); this node's workers keep their "
      "processes ({}){}",
      plan.generation, plan.world_size, plan.world_size == 1 ? "" : "s", from.world_size,
      survivors.empty() ? std::string("none survived") : fmt::format("{}", fmt::join(survivors, ", ")),
      any_live ? " and heal from the job's memory" : "");
  record["replaced"] = std::move(replaced);
  record["survivors"] = std::move(survivor_records);
  record["agent_ms"] = std::chrono::duration<double, std::milli>(Clock::now() - started).count();
  records_.push_back(std::move(record));
  return true;
}

void RecoveryCoordinator::carry(WorkerGroup&& group, const GenerationPlan& plan) {
  carried_.emplace(std::move(group));
  carried_from_ = {plan.generation, plan.world_size, plan.store_endpoint};
}

std::pair<WorkerGroup, PreviousGeneration> RecoveryCoordinator::take_carried() {
  WorkerGroup group = std::move(*carried_);
  carried_.reset();
  return {std::move(group), carried_from_};
}

void RecoveryCoordinator::stop() {
  if (carried_) {
    // Workers kept for an in-process recovery that will not come (the job gives up or stops).
    carried_->stop_for_restart();
    carried_.reset();
  }
  spares_.reset();
}

}  // namespace tenax::launcher
