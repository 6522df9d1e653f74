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
#include "shutdown_signals.h"
#include "tenax/core/error.h"
#include "tenax/core/files.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/kv_service.h"
#include "worker_process.h"

extern char** environ;

namespace tenax::launcher {
namespace {

using Clock = std::chrono::steady_clock;

enum class Outcome { kFinished, kFailed, kConfigError, kPreempted, kInterrupted };

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::kFinished: return "finished";
    case Outcome::kFailed: return "failed";
    case Outcome::kConfigError: return "configuration error";
    case Outcome::kPreempted: return "preempted";
    case Outcome::kInterrupted: return "interrupted";
  }
  return "unknown";
}

// One worker of the current generation, with what the agent learned about it.
struct Worker {
  int rank = 0;
  std::optional<WorkerProcess> process;  // empty when it could not be started
  bool stopped_by_agent = false;         // still running when the agent began stopping them

  bool ended() { return !process || process->poll().has_value(); }
};

struct GenerationRecord {
  int generation = 0;
  Outcome outcome = Outcome::kFailed;
  std::vector<nlohmann::json> workers;
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

class RunLoop {
 public:
  RunLoop(const RunOptions& options, elastic::KvService& service)
      : options_(options),
        service_(service),
        log_(logger("tenax.launcher")),
        host_(hostname()),
        inherited_env_(current_environment()) {}

  int run();

 private:
  GenerationRecord run_generation(int generation, int restart_count);
  // `signal` to every worker's process group, up to `grace` for them to exit, then SIGKILL.
  void stop_workers(std::vector<Worker>& workers, int signal, std::chrono::seconds grace);
  void stop_workers(std::vector<Worker>& workers) { stop_workers(workers, SIGTERM, options_.grace_period); }
  GenerationRecord finish_record(int generation, Outcome outcome, std::vector<Worker>& workers);
  void write_summary(int exit_code, Outcome outcome, int restarts);
  void set_identity(int generation) {
    LogIdentity identity;
    identity.rank = -1;
    identity.generation = generation;
    identity.role = "agent";
    set_log_identity(identity);
  }

  const RunOptions& options_;
  elastic::KvService& service_;
  std::shared_ptr<spdlog::logger> log_;
  std::string host_;
  std::vector<std::string> inherited_env_;
  std::filesystem::path run_dir_;
  std::string endpoint_;
  ShutdownSignals signals_;
  std::vector<GenerationRecord> history_;
};

int RunLoop::run() {
  std::error_code ec;
  std::filesystem::create_directories(options_.run_dir, ec);
  if (ec) {
    throw ConfigError("tenax run: cannot create run directory '" + options_.run_dir.string() +
                      "': " + ec.message() + "; pass --run-dir with a writable directory");
  }
  run_dir_ = std::filesystem::absolute(options_.run_dir).lexically_normal();
  endpoint_ = service_.endpoint();

  const int n = options_.nproc_per_node;
  int restarts = 0;
  int exit_code = 1;
  Outcome final_outcome = Outcome::kFailed;
  for (int generation = 0;; ++generation) {
    set_identity(generation);
    GenerationRecord record = run_generation(generation, restarts);
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
      service_.drop_prefix(old_prefix);
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

GenerationRecord RunLoop::run_generation(int generation, int restart_count) {
  const int n = options_.nproc_per_node;
  log_->info("starting {} (generation {}): {}", plural(n, "worker"), generation,
             shell_words(options_.command));

  std::vector<Worker> workers(static_cast<std::size_t>(n));
  for (int rank = 0; rank < n; ++rank) {
    Worker& w = workers[static_cast<std::size_t>(rank)];
    w.rank = rank;
    WorkerEnvironment values;
    values.rank = rank;
    values.world_size = n;
    values.generation = generation;
    values.restart_count = restart_count;
    values.max_restarts = options_.max_restarts;
    values.rdzv_endpoint = endpoint_;
    values.run_dir = run_dir_.string();
    try {
      w.process.emplace(
          WorkerProcess::spawn(options_.command, worker_environment(inherited_env_, values)));
      log_->debug("worker rank {} started (pid {})", rank, w.process->pid());
    } catch (const Error& e) {
      log_->error("worker rank {} (host {}) could not be started: {}", rank, host_, e.what());
      workers.resize(static_cast<std::size_t>(rank) + 1);
      stop_workers(workers);
      return finish_record(generation, Outcome::kFailed, workers);
    }
  }

  std::optional<Clock::time_point> preempt_deadline;
  for (;;) {
    if (int sig = signals_.wait(kPollInterval); sig != 0) {
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
    for (Worker& w : workers) {
      const bool known = w.process->status().has_value();
      std::optional<ExitStatus> status = w.process->poll();
      if (!status) {
        all_ended = false;
        continue;
      }
      if (known) continue;
      if (status->failed()) {
        log_->error("worker rank {} (pid {}, host {}) {}{}", w.rank, w.process->pid(), host_,
                    status->kind() == ExitStatus::Kind::kSignaled ? "was " : "",
                    status->describe());
        failed = true;
        config_error = config_error || status->config_error();
      } else if (status->preempted()) {
        log_->warn("worker rank {} (pid {}) exited with status {}: preempted", w.rank,
                   w.process->pid(), kPreemptedExitCode);
        if (!preempt_deadline) preempt_deadline = Clock::now() + options_.grace_period;
      } else {
        log_->info("worker rank {} (pid {}) finished", w.rank, w.process->pid());
      }
    }
    if (failed) {
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

GenerationRecord RunLoop::finish_record(int generation, Outcome outcome,
                                        std::vector<Worker>& workers) {
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
    w.process->reap(WorkerProcess::kReapTimeout);
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
  summary["max_restarts"] = options_.max_restarts;
  summary["nproc_per_node"] = options_.nproc_per_node;
  summary["host"] = host_;
  summary["rdzv_endpoint"] = endpoint_;
  summary["command"] = options_.command;
  nlohmann::json history = nlohmann::json::array();
  for (const GenerationRecord& g : history_) {
    nlohmann::json entry;
    entry["generation"] = g.generation;
    entry["outcome"] = outcome_name(g.outcome);
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
                                                 "MASTER_ADDR",
                                                 "MASTER_PORT",
                                                 "TORCHELASTIC_RESTART_COUNT",
                                                 "TORCHELASTIC_MAX_RESTARTS",
                                                 "TENAX_GENERATION",
                                                 "TENAX_RESTART_COUNT",
                                                 "TENAX_RDZV_ENDPOINT",
                                                 "TENAX_RUN_DIR"};
  return names;
}

std::vector<std::string> worker_environment(const std::vector<std::string>& inherited,
                                            const WorkerEnvironment& v) {
  const std::set<std::string> ours(worker_env_names().begin(), worker_env_names().end());
  std::vector<std::string> env;
  env.reserve(inherited.size() + ours.size());
  for (const std::string& entry : inherited) {
    if (ours.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
  }
  auto put = [&env](const char* name, const std::string& value) {
    env.push_back(std::string(name) + "=" + value);
  };
  const std::string rank = std::to_string(v.rank);
  const std::string world = std::to_string(v.world_size);
  put("RANK", rank);
  put("LOCAL_RANK", rank);
  put("WORLD_SIZE", world);
  put("LOCAL_WORLD_SIZE", world);
  put("GROUP_RANK", "0");
  put("GROUP_WORLD_SIZE", "1");
  put("ROLE_RANK", rank);
  put("ROLE_WORLD_SIZE", world);
  put("MASTER_ADDR", "127.0.0.1");
  put("MASTER_PORT", std::to_string(endpoint_port(v.rdzv_endpoint)));
  put("TORCHELASTIC_RESTART_COUNT", std::to_string(v.restart_count));
  put("TORCHELASTIC_MAX_RESTARTS", std::to_string(v.max_restarts));
  put("TENAX_GENERATION", std::to_string(v.generation));
  put("TENAX_RESTART_COUNT", std::to_string(v.restart_count));
  put("TENAX_RDZV_ENDPOINT", v.rdzv_endpoint);
  put("TENAX_RUN_DIR", v.run_dir);
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
    : options_(std::move(options)), service_(service) {}

int Agent::run() { return RunLoop(options_, service_).run(); }

}  // namespace tenax::launcher
