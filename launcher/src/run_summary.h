// The run's story in <run dir>/agent.json: how it ended, its generations and their workers, the
// in-process recoveries. Written once, when the agent exits.
// Thread-safety: pure functions (and one file write).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "generation.h"
#include "tenax/core/exit_codes.h"
#include "run_options.h"

namespace tenax::launcher {

struct RunSummary {
  Outcome outcome = Outcome::kFailed;
  int exit_code = kExitFailure;
  int restarts = 0;
  std::vector<GenerationRecord> history;
  std::vector<nlohmann::json> recoveries;  ///< RecoveryCoordinator::records()
  std::string host;
  std::string endpoint;  ///< the rendezvous or key-value service the workers used
};

/// agent.json's document; `extra` (the nodes' part, GenerationSource::describe) is merged in.
nlohmann::json summarize_run(const RunOptions& options, const RunSummary& run, const nlohmann::json& extra);

/// Writes `summary` atomically to <run_dir>/agent.json; a failure is logged, never thrown.
void write_run_summary(const std::filesystem::path& run_dir, const nlohmann::json& summary, spdlog::logger& log);

}  // namespace tenax::launcher
