#include "worker_group.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include <fmt/format.h>

#include "agent.h"
#include "tenax/core/error.h"
#include "tenax/elastic/wait_beacon.h"

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
      std::filesystem::remove(elastic::wait_beacon_path(w.progress_file), ec);
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
    for (std::size_t i : find_hung(narrow_hangs, events.failure)) {
      events.failed = true;
      events.lost.push_back(i);
    }
  }
  return events;
}

namespace {

double seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000.0; }

std::chrono::milliseconds age_of(std::filesystem::file_time_type changed, std::filesystem::file_time_type now) {
  return std::max(std::chrono::duration_cast<std::chrono::milliseconds>(now - changed), std::chrono::milliseconds(0));
}

}  // namespace

namespace {

// Outside the phases its progress file judges (before the first step, after the last: starting,
// evaluating, tearing down take as long as they take) a running worker is not judged; a stopped
// one is, by how long it has been stopped: a process stopped (SIGSTOP, a debugger) for longer
// than the timeout is doing none of these, and would otherwise hold the job until its time limit.
std::optional<HangFacts> stopped_outside_a_phase(Worker& w) {
  if (!w.process->stopped()) {
    w.stopped_since.reset();
    return std::nullopt;
  }
  const auto now = std::chrono::steady_clock::now();
  if (!w.stopped_since) w.stopped_since = now;
  HangFacts facts;
  facts.stopped = true;
  facts.progress_age = std::chrono::duration_cast<std::chrono::milliseconds>(now - *w.stopped_since);
  return facts;
}

}  // namespace

// --hang-timeout looks at a worker's progress file, and only when that is stale at its wait
// beacon and /proc: the common case costs one stat per worker and second.
std::optional<HangFacts> WorkerGroup::hang_facts(Worker& w) const {
  if (w.progress_file.empty() || w.ended()) return std::nullopt;
  std::error_code ec;
  const auto changed = std::filesystem::last_write_time(w.progress_file, ec);
  if (ec) return stopped_outside_a_phase(w);  // no progress reported yet, or none any more
  const auto now = std::filesystem::file_time_type::clock::now();
  HangFacts facts;
  facts.progress_age = age_of(changed, now);
  if (facts.progress_age <= options_.hang_timeout) return facts;
  facts.stopped = w.process->stopped();
  const std::filesystem::path beacon = elastic::wait_beacon_path(w.progress_file);
  const auto beat = std::filesystem::last_write_time(beacon, ec);
  if (!ec) {
    std::ifstream in(beacon);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (const std::optional<elastic::PeerWaitState> said = elastic::parse_wait_beacon(text)) {
      facts.beacon_age = age_of(beat, now);
      facts.beacon = *said;
    }
  }
  // ProgressFile::finish() removes the progress file, then the beacon: a worker caught between
  // the two stopped reporting on purpose and is not judged.
  if (!facts.beacon_age && !std::filesystem::exists(w.progress_file, ec)) return stopped_outside_a_phase(w);
  w.stopped_since.reset();
  return facts;
}

std::vector<std::size_t> WorkerGroup::find_hung(bool narrow, std::string& failure) {
  const auto timeout = options_.hang_timeout;
  std::vector<HangFacts> facts(workers_.size());
  std::vector<HangVerdict> verdicts(workers_.size());
  std::vector<HangRole> roles(workers_.size(), HangRole::kProgressing);
  std::optional<std::size_t> culprit;  // the first, for the waiters' lines
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (std::optional<HangFacts> f = hang_facts(workers_[i])) {
      facts[i] = *f;
      verdicts[i] = judge_hang(*f, timeout);
      roles[i] = verdicts[i].role;
    }
    if (roles[i] == HangRole::kProgressing) workers_[i].wait_logged = Worker::WaitLogged::kNothing;
    if (roles[i] == HangRole::kCulprit && !culprit) culprit = i;
  }
  const std::vector<bool> hung = hung_workers(roles, narrow);
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < workers_.size(); ++i) {
    if (roles[i] == HangRole::kProgressing) continue;
    Worker& w = workers_[i];
    const double stale = seconds(facts[i].progress_age);
    if (hung[i]) {
      const std::string& why = verdicts[i].why;
      log_->error("worker {} made no progress for {:.1f} s ({} unchanged, --hang-timeout {} s{}); treating it as hung",
                  where(w), stale, w.progress_file.string(), timeout.count(), why.empty() ? "" : "; " + why);
      if (failure.empty()) {
        failure = fmt::format("worker rank {} (pid {}) on {} hung (no progress for {:.1f} s{})", w.rank,
                              w.process->pid(), host_, stale, why.empty() ? "" : ": " + why);
      }
      out.push_back(i);
      continue;
    }
    if (culprit) {
      if (w.wait_logged == Worker::WaitLogged::kWithCulprit) continue;  // once per silence: looked at every second
      w.wait_logged = Worker::WaitLogged::kWithCulprit;
      log_->warn(
          "worker {} made no progress for {:.1f} s either, but it is running: it waits in a collective for the {} "
          "one; it keeps its process",
          where(w), stale, facts[*culprit].stopped ? "stopped" : "hung");
    } else if (w.wait_logged == Worker::WaitLogged::kNothing) {
      w.wait_logged = Worker::WaitLogged::kWithoutCulprit;
      log_->warn(
          "worker {} made no progress for {:.1f} s, but it waits in a collective ({:.1f} s so far), probably for "
          "{}; it keeps its process (it is taken for hung only after over {} s in it with no culprit found here)",
          where(w), stale, seconds(verdicts[i].waited),
          multi_node_ ? "a peer on another node" : "a peer whose silence is not yet past --hang-timeout",
          2 * timeout.count());
    }
  }
  return out;
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

bool WorkerGroup::all_succeeded() {
  return !workers_.empty() && std::all_of(workers_.begin(), workers_.end(), [](Worker& w) {
    return w.ended() && w.process && w.process->status() && w.process->status()->succeeded();
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
