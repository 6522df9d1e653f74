#include "worker_group.h"

#include <algorithm>

#include <fmt/format.h>

#include "agent.h"
#include "tenax/core/error.h"

namespace tenax::launcher {

WorkerGroup::WorkerGroup(const RunOptions& options, std::string host, std::string node_id, bool multi_node,
                         ShutdownSignals& signals, std::shared_ptr<spdlog::logger> log)
    : options_(options),
      host_(std::move(host)),
      multi_node_(multi_node),
      node_id_(std::move(node_id)),
      signals_(signals),
      log_(std::move(log)) {}

bool WorkerGroup::start(const GenerationPlan& plan, const JobEnvironment& job, bool as_replacements,
                        std::string& failure) {
  const int n = options_.nproc_per_node;
  workers_.clear();
  workers_.resize(static_cast<std::size_t>(n));
  for (int local = 0; local < n; ++local) {
    Worker& w = workers_[static_cast<std::size_t>(local)];
    WorkerEnvironment values = job.for_worker(plan, local);
    values.replacement = as_replacements;
    w.rank = values.rank;
    w.local_rank = local;
    if (!values.progress_file.empty()) {
      w.progress_file = values.progress_file;
      std::error_code ec;
      std::filesystem::create_directories(w.progress_file.parent_path(), ec);
      std::filesystem::remove(w.progress_file, ec);  // a stale one from the last generation
    }
    try {
      w.process.emplace(WorkerProcess::spawn(options_.command, job.environ_for(values)));
      log_->debug("worker rank {} started (pid {})", w.rank, w.process->pid());
    } catch (const Error& e) {
      log_->error("worker rank {} (host {}) could not be started: {}", w.rank, host_, e.what());
      failure = fmt::format("worker rank {} on {} could not be started", w.rank, host_);
      workers_.resize(static_cast<std::size_t>(local) + 1);
      stop_for_restart();
      workers_.clear();
      return false;
    }
  }
  return true;
}

WorkerEvents WorkerGroup::poll(bool check_hangs, bool narrow_hangs) {
  WorkerEvents events;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    const bool known = w.process->status().has_value();
    std::optional<ExitStatus> status = w.process->poll();
    if (!status) {
      events.all_ended = false;
      continue;
    }
    if (known) continue;
    if (status->failed()) {
      const char* was = status->kind() == ExitStatus::Kind::kSignaled ? "was " : "";
      if (multi_node_) {
        log_->error("worker {} {}{}", where(w), was, status->describe());
      } else {
        log_->error("worker rank {} (pid {}, host {}) {}{}", w.rank, w.process->pid(), host_, was, status->describe());
      }
      if (events.failure.empty()) {
        events.failure =
            fmt::format("worker rank {} (pid {}) on {} {}{}", w.rank, w.process->pid(), host_, was, status->describe());
      }
      events.failed = true;
      events.lost.push_back(i);
      events.config_error = events.config_error || status->config_error();
    } else if (status->preempted()) {
      log_->warn("worker rank {} (pid {}) exited with status {}: preempted", w.rank, w.process->pid(), kExitPreempted);
      events.preempted = true;
    } else {
      log_->info("worker rank {} (pid {}) finished", w.rank, w.process->pid());
    }
  }
  if (!events.failed && check_hangs) {
    for (std::size_t i : find_hung(narrow_hangs)) {
      events.failed = true;
      events.lost.push_back(i);
      if (events.failure.empty()) {
        events.failure = fmt::format("worker rank {} on {} hung (no progress for {} s)", workers_[i].rank, host_,
                                     options_.hang_timeout.count());
      }
    }
  }
  return events;
}

// --hang-timeout: a worker whose progress file exists and has not changed for that long.
bool WorkerGroup::hung(Worker& w) const {
  if (w.progress_file.empty() || w.ended()) return false;
  std::error_code ec;
  const auto changed = std::filesystem::last_write_time(w.progress_file, ec);
  if (ec) return false;  // never reported progress: not judged
  const auto age = std::filesystem::file_time_type::clock::now() - changed;
  return age > options_.hang_timeout;
}

std::vector<std::size_t> WorkerGroup::find_hung(bool narrow_allowed) {
  std::vector<std::size_t> hung_now;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (hung(workers_[i])) hung_now.push_back(i);
  }
  // A worker blocked in a collective on a hung peer makes no progress either. When only some of
  // them are stopped (SIGSTOP, a debugger), those are the hung ones; the others keep their
  // process under in-process recovery. Otherwise there is no telling, and all count as hung.
  std::vector<std::size_t> stopped;
  for (std::size_t i : hung_now) {
    if (workers_[i].process->stopped()) stopped.push_back(i);
  }
  const bool narrow = narrow_allowed && !stopped.empty() && stopped.size() < hung_now.size();
  for (std::size_t i : hung_now) {
    Worker& w = workers_[i];
    const bool is_hung = !narrow || std::find(stopped.begin(), stopped.end(), i) != stopped.end();
    if (is_hung) {
      log_->error("worker {} made no progress for over {} s ({} unchanged, --hang-timeout {} s{}); treating it as hung",
                  where(w), options_.hang_timeout.count(), w.progress_file.string(), options_.hang_timeout.count(),
                  w.process->stopped() ? "; the process is stopped" : "");
    } else {
      log_->warn(
          "worker {} made no progress for over {} s either, but it is running: it waits in a collective for "
          "the stopped one; it keeps its process",
          where(w), options_.hang_timeout.count());
    }
  }
  return narrow ? stopped : hung_now;
}

std::string WorkerGroup::where(const Worker& w) const {
  std::string out = fmt::format("rank {} (", w.rank);
  if (multi_node_) out += fmt::format("local {}, ", w.local_rank);
  if (w.process) out += fmt::format("pid {}, ", w.process->pid());
  out += "host " + host_;
  if (multi_node_) out += ", node " + node_id_;
  return out + ")";
}

void WorkerGroup::stop_for_restart() { stop(kRestartStopSignal, options_.grace_period); }

// `signal` goes to every worker's process group, also the groups of workers that already ended:
// their children may linger.
void WorkerGroup::stop(int signal, std::chrono::seconds grace) {
  int running = 0;
  for (Worker& w : workers_) {
    if (!w.process) continue;
    if (!w.ended()) {
      w.stopped_by_agent = true;
      ++running;
    }
    w.process->signal_group(signal);
  }
  if (running > 0) {
    log_->info("stopping {} remaining worker{}: {}, SIGKILL after {} s", running, running == 1 ? "" : "s",
               signal_name(signal), grace.count());
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  const int signals_before = signals_.count();
  while (any_running() && std::chrono::steady_clock::now() < deadline) {
    signals_.wait(kPollInterval);
    if (signals_.count() > std::max(signals_before, 1)) {
      log_->warn("second signal received; not waiting for the grace period");
      break;
    }
  }
  for (Worker& w : workers_) {
    if (!w.process) continue;
    if (!w.ended()) {
      log_->warn("worker rank {} (pid {}) did not stop within {} s of {}; sending SIGKILL", w.rank, w.process->pid(),
                 grace.count(), signal_name(signal));
    }
    w.process->signal_group(SIGKILL);
  }
  for (Worker& w : workers_) {
    if (w.process && !w.process->reap(WorkerProcess::kReapTimeout)) {
      log_->error("worker rank {} (pid {}) is still not gone after SIGKILL", w.rank, w.process->pid());
    }
  }
}

bool WorkerGroup::all_saved_and_preempted() const {
  const bool saved = std::all_of(workers_.begin(), workers_.end(), [](const Worker& w) {
    return w.process && w.process->status() && (w.process->status()->preempted() || w.process->status()->succeeded());
  });
  return saved && any_preempted();
}

bool WorkerGroup::any_preempted() const {
  return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) {
    return w.process && w.process->status() && w.process->status()->preempted();
  });
}

bool WorkerGroup::any_succeeded() const {
  return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) {
    return w.process && w.process->status() && w.process->status()->succeeded();
  });
}

bool WorkerGroup::any_running() {
  return std::any_of(workers_.begin(), workers_.end(), [](Worker& w) { return !w.ended(); });
}

std::vector<nlohmann::json> WorkerGroup::record(bool reap) {
  std::vector<nlohmann::json> out;
  for (Worker& w : workers_) {
    nlohmann::json j;
    j["rank"] = w.rank;
    if (!w.process) {
      j["started"] = false;
      out.push_back(std::move(j));
      continue;
    }
    if (reap) w.process->reap(WorkerProcess::kReapTimeout);
    j["started"] = true;
    j["pid"] = w.process->pid();
    j["stopped_by_agent"] = w.stopped_by_agent;
    if (const auto& status = w.process->status()) {
      j["status"] = status->describe();
      j["exit_code"] =
          status->kind() == ExitStatus::Kind::kExited ? nlohmann::json(status->code()) : nlohmann::json(nullptr);
      j["signal"] = status->kind() == ExitStatus::Kind::kSignaled ? nlohmann::json(signal_name(status->signal()))
                                                                  : nlohmann::json(nullptr);
    }
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace tenax::launcher
