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

// After an in-process recovery, how long the agent waits before it starts a new warm spare.
constexpr std::chrono::seconds kSpareRefillDelay{2};

}  // namespace

RecoveryCoordinator::RecoveryCoordinator(const RunOptions& options, const JobEnvironment& job, bool multi_node,
                                         std::shared_ptr<spdlog::logger> log)
    : options_(options), job_(job), multi_node_(multi_node), log_(std::move(log)) {}

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
  ready_generation_ = -1;
  healing_generation_ = -1;
  event_losses_ = 0;
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
  if (Clock::now() >= refill_spares_after_) spares_->fill();
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

LossFacts RecoveryCoordinator::loss_facts(WorkerGroup& group, const std::vector<std::size_t>& lost, bool config_error,
                                          const GenerationPlan& plan, int restarts_used) {
  std::vector<Worker>& workers = group.workers();
  LossFacts facts;
  facts.mode = options_.recovery;
  facts.config_error = config_error;
  facts.world_size = plan.world_size;
  facts.restarts_used = restarts_used;
  facts.max_restarts = options_.max_restarts;
  // First who has healed: every rank said so in this generation (a replacement that healed
  // holds state like any survivor), or in an earlier one of this run (a loss while the current
  // one heals comes before its count is complete).
  facts.ready = store().add(elastic::ready_key(plan.generation), 0);
  if (facts.ready >= facts.world_size) {
    ready_generation_ = plan.generation;
    for (Worker& w : workers) w.unhealed_replacement = false;  // every rank healed
  }
  // The phase: healed in this generation; or this generation heals an earlier loss and has not
  // finished (the fault event goes on); or it started from disk and has not begun training.
  if (ready_generation_ == plan.generation) {
    facts.phase = RecoveryPhase::kSteady;
  } else if (plan.generation == healing_generation_ || ready_generation_ >= 0) {
    facts.phase = RecoveryPhase::kHealing;
    facts.event_losses = event_losses_;
  } else {
    facts.phase = RecoveryPhase::kStarting;
  }
  if (ready_generation_ >= 0) facts.ready = facts.world_size;
  // Then who holds state: replacements that have not healed hold none, so if only they are left
  // on the only node, nobody survived. (Across nodes another node's workers may still hold it.)
  int holders = 0;
  for (std::size_t i = 0; i < workers.size(); ++i) {
    const bool is_lost = std::find(lost.begin(), lost.end(), i) != lost.end();
    holders += !is_lost && !workers[i].unhealed_replacement ? 1 : 0;
  }
  facts.lost = holders == 0 && !multi_node_ ? facts.world_size : static_cast<int>(lost.size());
  return facts;
}

bool RecoveryCoordinator::may_recover(WorkerGroup& group, const std::vector<std::size_t>& lost, bool config_error,
                                      const GenerationPlan& plan, int restarts_used) {
  if (!enabled()) return false;
  LossFacts facts;
  try {
    facts = loss_facts(group, lost, config_error, plan, restarts_used);
  } catch (const Error& e) {
    log_->warn("cannot read which workers heal in process ({}); restarting instead", e.what());
    return false;
  }
  const LossDecision decision = decide_on_loss(facts);
  // One node heals inside the generation, which goes on: its next end is charged as usual.
  // Across nodes the recovery ends the generation, and the loop charges it as decided here.
  charge_ = multi_node_ || decision.action != LossAction::kReplaceInProcess ? decision.charged : true;
  if (facts.phase == RecoveryPhase::kHealing) {
    ++event_losses_;
    log_->warn(
        "a loss while generation {} heals the last one: the same fault event ({} loss{}; not charged to "
        "--max-restarts again)",
        plan.generation, event_losses_ + 1, event_losses_ + 1 == 1 ? "" : "es");
  } else if (decision.action == LossAction::kReplaceInProcess) {
    event_losses_ = 0;
    ++charged_events_;
    event_charged_ = true;
  }
  if (decision.action != LossAction::kReplaceInProcess) {
    log_->warn("in-process recovery is not possible: {}; every worker restarts from the newest checkpoint",
               decision.why_not);
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
  std::string why_not;
  if (plan.world_size > from.world_size) {
    why_not = fmt::format("the world grows from {} to {} ranks, and new ranks start from a checkpoint", from.world_size,
                          plan.world_size);
  } else if (plan.store_endpoint != from.store_endpoint) {
    why_not = fmt::format(
        "the job's store moved to {} (the rendezvous host was lost), and the workers' "
        "connections to the old one went with it",
        plan.store_endpoint);
  } else if (group.any_succeeded()) {
    why_not = "a worker of this node already finished";
  } else if (!multi_node_ && std::none_of(group.workers().begin(), group.workers().end(),
                                          [](Worker& w) { return !w.ended() && !w.unhealed_replacement; })) {
    // Every worker died before the first could be replaced (seen one poll apart): nobody holds
    // the state. Across nodes another node's workers may.
    why_not = "no worker survived to heal the others from";
  }
  if (!why_not.empty()) {
    // The restart that follows is this fault event's charge, not a second one.
    if (!multi_node_ && event_charged_) --charged_events_;
    event_charged_ = false;
    log_->warn(
        "generation {} formed, but in-process recovery is not possible: {}; this node's workers restart from "
        "the newest checkpoint",
        plan.generation, why_not);
    return false;
  }
  const auto started = Clock::now();
  ++recoveries_;
  healing_generation_ = plan.generation;
  event_charged_ = false;
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
  // A new spare loads libtorch (about half a core-second): started at once, it would compete
  // with the heal for this node's cores. The pool refills once the heal has had its moment.
  refill_spares_after_ = Clock::now() + kSpareRefillDelay;
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
