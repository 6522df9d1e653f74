#include "run_summary.h"

#include "tenax/core/error.h"
#include "tenax/core/files.h"

namespace tenax::launcher {

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

nlohmann::json summarize_run(const RunOptions& options, const RunSummary& run, const nlohmann::json& extra) {
  nlohmann::json summary;
  summary["outcome"] = outcome_name(run.outcome);
  summary["exit_code"] = run.exit_code;
  summary["generations"] = run.history.size();
  summary["restarts"] = run.restarts;
  summary["recovery"] = options.recovery == RecoveryMode::kInProcess ? "in-process" : "restart";
  summary["in_process_recoveries"] = run.recoveries;
  summary["max_restarts"] = options.max_restarts;
  summary["nproc_per_node"] = options.nproc_per_node;
  summary["host"] = run.host;
  summary["rdzv_endpoint"] = run.endpoint;
  summary.update(extra);
  summary["command"] = options.command;
  nlohmann::json history = nlohmann::json::array();
  for (const GenerationRecord& g : run.history) {
    nlohmann::json entry;
    entry["generation"] = g.generation;
    entry["master_port"] = g.master_port;
    entry["outcome"] = outcome_name(g.outcome);
    if (!g.reason.empty()) entry["reason"] = g.reason;
    entry["workers"] = g.workers;
    history.push_back(std::move(entry));
  }
  summary["history"] = std::move(history);
  return summary;
}

void write_run_summary(const std::filesystem::path& run_dir, const nlohmann::json& summary, spdlog::logger& log) {
  const std::filesystem::path path = run_dir / "agent.json";
  try {
    files::atomic_write(path, summary.dump(2) + "\n");
    log.info("run summary written to {}", path.string());
  } catch (const Error& e) {
    log.error("could not write the run summary: {}", e.what());
  }
}

}  // namespace tenax::launcher
