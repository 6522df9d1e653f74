#include "rdzv_command.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <sstream>

#include <unistd.h>

#include "exit_status.h"
#include "shutdown_signals.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/rendezvous_service.h"

namespace tenax::launcher {
namespace {

constexpr const char* kCommand = "tenax rdzv";
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out.empty() ? "-" : out;
}

// One line per change an operator cares about: who is in, who waits, what was refused.
std::string describe(const elastic::RendezvousSnapshot& s) {
  std::ostringstream out;
  out << "generation " << s.generation << ": members " << joined(s.members) << " (" << s.world_size
      << " workers), live " << joined(s.live) << ", waiting " << joined(s.waiting) << ", finished "
      << joined(s.finished) << ", nodes lost " << s.nodes_lost;
  if (s.restart_requested) out << "; ending: " << s.restart_reason;
  if (!s.last_failure.empty()) out << "; last failed round: " << s.last_failure;
  return out.str();
}

}  // namespace

RdzvOptions parse_rdzv_options(const std::vector<std::string>& args) {
  RdzvOptions options;
  bool saw_nnodes = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::optional<std::string> value;
    if (const auto eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    static const std::vector<std::string> known = {"--nnodes",       "--host",         "--port",
                                                   "--keys-file",    "--last-call",    "--join-timeout",
                                                   "--heartbeat-interval", "--heartbeat-liveness"};
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      flag_error(kCommand, "unknown argument '" + name + "' (see `tenax rdzv --help`)");
    }
    if (!value) {
      if (i + 1 >= args.size()) flag_error(kCommand, name + " needs a value (see `tenax rdzv --help`)");
      value = args[++i];
    }
    if (name == "--nnodes") {
      options.nodes = parse_node_range(kCommand, *value);
      saw_nnodes = true;
    } else if (name == "--host") {
      if (value->empty()) flag_error(kCommand, "--host needs an address to bind, e.g. --host '*' or --host 10.0.0.5");
      options.host = *value;
    } else if (name == "--port") {
      options.port = parse_flag_int(kCommand, name, *value, 0, "a TCP port (0: any free one)", "29400");
      if (options.port > 65535) flag_error(kCommand, "--port must be at most 65535, got " + *value);
    } else if (name == "--keys-file") {
      if (value->empty()) flag_error(kCommand, "--keys-file needs a file name, e.g. --keys-file /shared/job/tenax-job.keys");
      options.keys_file = *value;
    } else if (name == "--last-call") {
      options.last_call = std::chrono::seconds(parse_flag_int(kCommand, name, *value, 0, "whole seconds", "3"));
    } else if (name == "--join-timeout") {
      options.join_timeout = std::chrono::seconds(parse_flag_int(kCommand, name, *value, 1, "whole seconds", "300"));
    } else if (name == "--heartbeat-interval") {
      options.heartbeat_interval =
          std::chrono::milliseconds(parse_flag_int(kCommand, name, *value, 10, "whole milliseconds", "500"));
    } else {  // --heartbeat-liveness
      options.heartbeat_liveness = parse_flag_int(kCommand, name, *value, 2, "a whole number of beats", "5");
    }
  }
  if (!saw_nnodes) flag_error(kCommand, "missing --nnodes; say how many nodes a generation needs, e.g. --nnodes 1:2");
  return options;
}

std::string rdzv_usage() {
  std::ostringstream out;
  out << "Usage: tenax rdzv --nnodes MIN:MAX [options]\n"
      << "\n"
      << "Serves the rendezvous (membership, heartbeats, the workers' key-value store) of one job\n"
      << "on its own, until SIGINT/SIGTERM. The job's agents then run\n"
      << "  tenax run --rdzv-endpoint THIS_HOST:PORT --rdzv-host no --keys-file FILE --nnodes MIN:MAX ...\n"
      << "\n"
      << "Options:\n"
      << "  --nnodes MIN:MAX          nodes a generation needs and may have (required)\n"
      << "  --host ADDR               address to bind (default * = every interface)\n"
      << "  --port P                  membership port (default " << kDefaultRdzvPort
      << "; the store takes any free port)\n"
      << "  --keys-file FILE          the job's CURVE keys, written (mode 0600) if missing (default ./"
      << elastic::kJobKeysFileName << ");\n"
      << "                            the agents and workers need the same file\n"
      << "  --last-call SECONDS       once MIN nodes joined, how long to wait for more (default 3)\n"
      << "  --join-timeout SECONDS    fail a round with fewer than MIN nodes by then (default 300)\n"
      << "  --heartbeat-interval MS   (default 500)\n"
      << "  --heartbeat-liveness N    missed beats before a node is lost (default 5)\n";
  return out.str();
}

int run_rdzv_command(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--help" || a == "-h") {
      std::cout << rdzv_usage();
      return 0;
    }
  }
  RdzvOptions options;
  std::optional<elastic::JobKeys> keys;
  try {
    options = parse_rdzv_options(args);
    keys = elastic::create_or_read_job_keys(options.keys_file);
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\nRun `tenax rdzv --help` for usage.\n";
    return kExitUsage;
  }
  set_log_identity(LogIdentity{-1, 0, "rdzv"});
  auto log = logger("tenax.launcher");
  try {
    ShutdownSignals signals;
    elastic::RendezvousService service(
        elastic::RendezvousOptions(options.nodes.min, options.nodes.max)
            .last_call(options.last_call)
            .join_timeout(options.join_timeout)
            .heartbeat(elastic::HeartbeatOptions()
                           .interval(options.heartbeat_interval)
                           .liveness(options.heartbeat_liveness))
            .keys(*keys));
    const std::string bound =
        service.start("tcp://" + options.host + ":" + std::to_string(options.port));
    char hostname[256] = {};
    (void)::gethostname(hostname, sizeof hostname - 1);
    log->info("serving {}..{} node(s) at {}; agents: tenax run --rdzv-endpoint {}:{} --rdzv-host no --keys-file {} "
              "--nnodes {}:{} ...",
              options.nodes.min, options.nodes.max, bound, hostname, bound.substr(bound.rfind(':') + 1),
              std::filesystem::absolute(options.keys_file).string(), options.nodes.min, options.nodes.max);
    std::string last;
    while (signals.wait(std::chrono::milliseconds(200)) == 0) {
      const std::string now = describe(service.snapshot());
      if (now != last) log->info("{}", now);
      last = now;
    }
    const auto final_state = service.snapshot();
    log->info("stopping on {}: {}; {} peer(s) refused for want of the job's keys", signal_name(signals.received()),
              describe(final_state), final_state.refused_peers);
    service.stop();
    return 0;
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\nRun `tenax rdzv --help` for usage.\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    log->error("{}", e.what());
    return kExitFailure;
  }
}

}  // namespace tenax::launcher
