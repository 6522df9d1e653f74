// Rank-aware loggers, one per component ("tenax.elastic", "tenax.storage", ...).
//
// Every line carries the rank and generation of the process that wrote it, so that the
// interleaved stderr of many ranks stays readable. Library code never writes to stdout.
// Rank-0-only output goes through `LogPolicy::kRankZeroOnly`, not `if (rank == 0)`.
// Thread-safety: loggers are spdlog's thread-safe (_mt) sinks; configure once at start.
//
//   tenax::set_log_identity({.rank = 1, .generation = 2});
//   auto log = tenax::logger("tenax.sdk");
//   log->info("resumed at step {}", step);
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace tenax {

struct LogIdentity {
  int rank = -1;  ///< -1 for processes that are not ranks (the agent)
  int generation = 0;
  std::string role = "worker";  ///< "worker", "agent", "rdzv", "cli"
};

enum class LogPolicy { kAllRanks, kRankZeroOnly };

/// Sets the rank/generation shown in every log line of this process, and the level from
/// TENAX_LOG_LEVEL (trace|debug|info|warn|error; default info).
void set_log_identity(const LogIdentity& identity);

/// The named component logger (created on first use, stderr sink). With kRankZeroOnly,
/// ranks other than 0 get a logger that drops everything below warn.
std::shared_ptr<spdlog::logger> logger(const std::string& component, LogPolicy policy = LogPolicy::kAllRanks);

}  // namespace tenax
