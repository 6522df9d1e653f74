// The options of `tenax run`, and the pure parser from the command line into them.
//
//   tenax run --nproc-per-node N [--max-restarts K] [--run-dir DIR] [--grace-period SECONDS]
//             [--preempt-grace SECONDS] [--hang-timeout SECONDS]
//             [--nnodes MIN:MAX] [--node-id ID] [--rdzv-endpoint HOST:PORT] [--rdzv-host yes|no|auto]
//             [--heartbeat-interval MS] [--heartbeat-liveness N] [--join-timeout SECONDS]
//             [--keys-file FILE] [--rdzv-id ID] [--standalone] [--monitor-interval SECONDS]
//             [--recovery in-process|restart] [--spares K]
//             ( -- PROGRAM ARGS... | SCRIPT.py ARGS... | -m MODULE ARGS... | --no-python PROGRAM ARGS... )
//
// torchrun's spellings are accepted beside these: underscores for dashes (--nproc_per_node,
// --max_restarts, --rdzv_endpoint, ...), and its program forms without `--`: a Python script
// (run as `python3 -u SCRIPT.py ARGS`), `-m MODULE` (`python3 -u -m MODULE ARGS`) and
// `--no-python PROGRAM`. torchrun flags that tenax run has no use for are refused by name with
// what to write instead, so that a job script moved from torchrun fails loudly, not subtly.
//
// The multi-node flags only say what was written; multi_node_plan.h decides, with the Slurm
// environment, whether this is a multi-node run and who hosts the rendezvous.
//
// parse_run_options() touches nothing outside its arguments, so every usage error can be
// unit-tested; it throws tenax::ConfigError (exit code 2) with a message that names the flag and
// says what to write instead. find_program() is the one check that looks at the file system.
// Thread-safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "flag_values.h"
#include "tenax/elastic/job_keys.h"

namespace tenax::launcher {

inline constexpr int kDefaultMaxRestarts = 3;
inline constexpr std::chrono::seconds kDefaultGracePeriod{5};
/// How long workers get to checkpoint after a preemption signal (Slurm's usual warning lead).
inline constexpr std::chrono::seconds kDefaultPreemptGrace{120};
inline constexpr const char* kDefaultRunDir = "tenax-run";
inline constexpr std::chrono::milliseconds kDefaultAgentHeartbeat{500};
inline constexpr int kDefaultAgentLiveness = 5;
inline constexpr std::chrono::seconds kDefaultJoinTimeout{300};
/// How often the agent looks at its workers when nothing wakes it earlier (--monitor-interval).
inline constexpr std::chrono::milliseconds kDefaultMonitorInterval{20};
/// The interpreter for a Python script or -m MODULE (found in PATH, so a venv's comes first).
inline constexpr const char* kPythonInterpreter = "python3";

/// --spares: warm spare workers per node under --recovery in-process.
inline constexpr int kDefaultSpares = 1;

/// --recovery: what a lost worker costs the others (DESIGN.md decision 13).
enum class RecoveryMode {
  kRestart,    ///< every worker restarts and resumes from the newest checkpoint
  kInProcess,  ///< survivors keep their processes; the lost rank is replaced and heals from a peer
};

/// --rdzv-host: whether this agent hosts the rendezvous service.
enum class RdzvHosting { kAuto, kYes, kNo };

struct RunOptions {
  int nproc_per_node = 0;                                     ///< workers on this node (>= 1)
  int max_restarts = kDefaultMaxRestarts;                     ///< restarts before giving up (>= 0)
  std::filesystem::path run_dir = kDefaultRunDir;             ///< agent.json and TENAX_RUN_DIR
  std::chrono::seconds grace_period = kDefaultGracePeriod;    ///< SIGTERM → SIGKILL wait
  std::chrono::seconds preempt_grace = kDefaultPreemptGrace;  ///< forwarded signal → SIGKILL wait
  /// A worker whose progress file ($TENAX_PROGRESS_FILE) is older than this is hung; 0 = off.
  std::chrono::seconds hang_timeout{0};
  std::optional<NodeRange> nnodes;             ///< --nnodes; unset = not given
  std::string node_id;                         ///< --node-id; "" = not given
  std::string rdzv_endpoint;                   ///< --rdzv-endpoint host:port
  RdzvHosting rdzv_host = RdzvHosting::kAuto;  ///< --rdzv-host
  std::chrono::milliseconds heartbeat_interval = kDefaultAgentHeartbeat;
  int heartbeat_liveness = kDefaultAgentLiveness;
  std::chrono::seconds join_timeout = kDefaultJoinTimeout;  ///< fewer than MIN nodes by then: fail
  std::filesystem::path keys_file;                          ///< --keys-file; empty: job_keys_path()
  std::string node_host;                                    ///< --node-host; "" = Slurm node name or hostname
  /// --lease-timeout: a rendezvous lease unrenewed this long is dead (failover); 0 = 2 x expiry.
  std::chrono::milliseconds lease_timeout{0};
  /// --rdzv-id: the job's id for the workers (TORCHELASTIC_RUN_ID); "" = the Slurm job id, else "none".
  std::string rdzv_id;
  /// --standalone: a single-node run with its own rendezvous, also under srun or with --nnodes 1.
  bool standalone = false;
  std::chrono::milliseconds monitor_interval = kDefaultMonitorInterval;  ///< --monitor-interval
  RecoveryMode recovery = RecoveryMode::kRestart;                        ///< --recovery
  int spares = kDefaultSpares;                                           ///< --spares (in-process only)
  std::vector<std::string> command;                                      ///< PROGRAM ARGS... (non-empty)

  bool operator==(const RunOptions& other) const {
    return nproc_per_node == other.nproc_per_node && max_restarts == other.max_restarts && run_dir == other.run_dir &&
           grace_period == other.grace_period && preempt_grace == other.preempt_grace &&
           hang_timeout == other.hang_timeout && nnodes == other.nnodes && node_id == other.node_id &&
           rdzv_endpoint == other.rdzv_endpoint && rdzv_host == other.rdzv_host &&
           heartbeat_interval == other.heartbeat_interval && heartbeat_liveness == other.heartbeat_liveness &&
           join_timeout == other.join_timeout && node_host == other.node_host && lease_timeout == other.lease_timeout &&
           keys_file == other.keys_file && rdzv_id == other.rdzv_id && standalone == other.standalone &&
           monitor_interval == other.monitor_interval && recovery == other.recovery && spares == other.spares &&
           command == other.command;
  }
};

/// Parses the arguments that follow `tenax run` (args[0] is the first flag, not "run").
/// Accepts `--flag value` and `--flag=value`, and torchrun's spellings (see above); the command
/// of a Python script or module starts with kPythonInterpreter. Throws ConfigError naming the
/// offending flag.
RunOptions parse_run_options(const std::vector<std::string>& args);

/// The same over a C argument vector where argv[0] is the subcommand ("run") and is skipped.
RunOptions parse_run_options(int argc, const char* const* argv);

/// True when `--help`/`-h` appears among the flags, before `--` or the program (after them,
/// the flags belong to the program).
bool run_help_requested(const std::vector<std::string>& args);

/// Resolves the program the way posix_spawnp() will (PATH search unless it contains '/').
/// Returns the path found; throws ConfigError when it is missing or not executable.
std::filesystem::path find_program(const std::string& program);

/// The job's CURVE key file: --keys-file, else <run dir>/tenax-job.keys, or, when the run
/// directory holds %n (one per node), the same name in the directory above its first
/// component holding %n ("out/run-%n" → "out/tenax-job.keys"), which the nodes share.
std::filesystem::path job_keys_path(const RunOptions& options);

/// The text of `tenax run --help`.
std::string run_usage();

}  // namespace tenax::launcher
