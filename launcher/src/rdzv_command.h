// `tenax rdzv`: the rendezvous service on its own, for jobs whose agents should not host it
// (a service node that outlives every training node, or a login node).
//
//   tenax rdzv --nnodes MIN:MAX [--host ADDR] [--port P] [--keys-file FILE]
//              [--last-call SECONDS] [--join-timeout SECONDS]
//              [--heartbeat-interval MS] [--heartbeat-liveness N]
//
// It writes (or reuses) the job's key file, serves until SIGINT/SIGTERM (exit 0), and logs each
// change of the generation, its members and the nodes waiting. The agents then run
//   tenax run --rdzv-endpoint HOST:P --rdzv-host no --keys-file FILE --nnodes MIN:MAX ...
// Thread-safety: parse_rdzv_options is pure; run_rdzv_command runs on the main thread (it
// installs signal handlers).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "flag_values.h"
#include "tenax/elastic/job_keys.h"

namespace tenax::launcher {

inline constexpr int kDefaultRdzvPort = 29400;

struct RdzvOptions {
  NodeRange nodes;                                              ///< --nnodes (required)
  std::string host = "*";                                       ///< --host: the address to bind
  int port = kDefaultRdzvPort;                                  ///< --port (0: any free port)
  std::filesystem::path keys_file = elastic::kJobKeysFileName;  ///< --keys-file
  std::chrono::seconds last_call{3};                            ///< --last-call
  std::chrono::seconds join_timeout{300};                       ///< --join-timeout
  std::chrono::milliseconds heartbeat_interval{500};            ///< --heartbeat-interval
  int heartbeat_liveness = 5;                                   ///< --heartbeat-liveness
  /// --position: this instance's place among the job's rendezvous candidates (0 serves first;
  /// the others stand by and take over, lowest first, when the lease of the serving one dies).
  int position = 0;
  std::string advertise;                       ///< --advertise: host agents use
  std::chrono::milliseconds lease_timeout{0};  ///< --lease-timeout (0: 2 x expiry)
};

/// Parses the arguments after `tenax rdzv`. Throws ConfigError ("tenax rdzv: ...") naming the flag.
RdzvOptions parse_rdzv_options(const std::vector<std::string>& args);

std::string rdzv_usage();

/// The whole subcommand: usage errors print and return 2; serving returns 0 after a signal,
/// 1 when the service cannot start.
int run_rdzv_command(const std::vector<std::string>& args);

}  // namespace tenax::launcher
