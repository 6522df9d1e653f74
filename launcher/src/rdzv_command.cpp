#include "rdzv_command.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <iostream>
#include <optional>
#include <sstream>

#include <unistd.h>

#include "exit_status.h"
#include "generation_claim.h"
#include "shutdown_signals.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/host_election.h"
#include "tenax/elastic/rendezvous_lease.h"
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
                                                   "--heartbeat-interval", "--heartbeat-liveness",
                                                   "--position",     "--advertise",    "--lease-timeout"};
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
    } else if (name == "--position") {
      options.position = parse_flag_int(kCommand, name, *value, 0, "a whole number (0 serves first)", "1");
    } else if (name == "--advertise") {
      if (value->empty() || value->find_first_of(" \t/:") != std::string::npos) {
        flag_error(kCommand, "--advertise expects a host name or address the agents reach, e.g. --advertise rdzv01");
      }
      options.advertise = *value;
    } else if (name == "--lease-timeout") {
      options.lease_timeout =
          std::chrono::milliseconds(parse_flag_int(kCommand, name, *value, 10, "whole milliseconds", "5000"));
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
      << "  --heartbeat-liveness N    missed beats before a node is lost (default 5)\n"
      << "\n"
      << "Failover: the serving instance holds a lease (" << elastic::kLeaseFileName << ") beside the keys file;\n"
      << "start one instance per candidate host, each with its own --position, sharing that\n"
      << "directory: position 0 serves, the others stand by and the lowest takes over when the lease\n"
      << "is not renewed for the lease timeout. Agents started with --rdzv-host no follow the lease.\n"
      << "  --position N              this candidate's place (default 0: serves first)\n"
      << "  --advertise HOST          the address agents connect to (default: --host, or this host's name)\n"
      << "  --lease-timeout MS        a lease unrenewed this long is dead (default 2 x interval x liveness)\n";
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
    const auto heartbeat =
        elastic::HeartbeatOptions().interval(options.heartbeat_interval).liveness(options.heartbeat_liveness);
    const auto lease_timeout = options.lease_timeout.count() > 0 ? options.lease_timeout : heartbeat.expiry() * 2;
    const std::filesystem::path dir = std::filesystem::absolute(options.keys_file).parent_path();
    const elastic::LeaseFile lease_file(dir);
    char hostname[256] = {};
    (void)::gethostname(hostname, sizeof hostname - 1);
    const std::string advertise =
        !options.advertise.empty() ? options.advertise : options.host != "*" ? options.host : std::string(hostname);
    const std::string node = "rdzv-" + std::to_string(options.position);
    elastic::HostElection election(
        node, elastic::HostElectionOptions(options.position, lease_timeout).stagger_step(heartbeat.interval() * 2));
    auto unix_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(
                 std::chrono::system_clock::now().time_since_epoch())
          .count();
    };
    std::optional<elastic::RendezvousService> service;
    std::unique_ptr<elastic::LeaseKeeper> keeper;
    std::string last;
    std::string standing_by;
    while (signals.wait(std::chrono::milliseconds(200)) == 0) {
      if (keeper && keeper->deposed()) {
        log->warn("another rendezvous instance took the lease over; this one stops serving and stands by");
        keeper.reset();
        service.reset();
      }
      if (!service) {
        election.observe(lease_file.read(), std::chrono::steady_clock::now(), unix_ms());
        const auto d = election.decide(std::chrono::steady_clock::now());
        if (d.action != elastic::HostElection::Action::kClaim) {
          if (d.reason != standing_by) log->info("standing by (position {}): {}", options.position, d.reason);
          standing_by = d.reason;
          continue;
        }
        const elastic::GenerationFence fence(dir);
        const StatusOr<std::int64_t> fenced = fence.current();
        service.emplace(elastic::RendezvousOptions(options.nodes.min, options.nodes.max)
                            .last_call(options.last_call)
                            .join_timeout(options.join_timeout)
                            .heartbeat(heartbeat)
                            .keys(*keys)
                            .generations_above(std::max(election.highest_generation(),
                                                        fenced.is_ok() ? fenced.value() : std::int64_t{-1}))
                            .claim_generation(fenced_generation_claim(lease_file, fence, d.term, node)));
        const std::string bound = service->start("tcp://" + options.host + ":" + std::to_string(options.port));
        elastic::LeaseRecord record;
        record.term = d.term;
        record.holder = node;
        record.endpoint = "tcp://" + advertise + ":" + bound.substr(bound.rfind(':') + 1);
        record.generation = election.highest_generation();
        if (!lease_file.claim(record)) {
          service.reset();
          continue;
        }
        elastic::RendezvousService* raw = &*service;
        keeper = std::make_unique<elastic::LeaseKeeper>(lease_file, record, heartbeat.interval(),
                                                        [raw] { return raw->snapshot().generation; });
        log->info("serving {}..{} node(s) at {} (lease term {}: {}); agents: tenax run --rdzv-endpoint {}:{} "
                  "--rdzv-host no --keys-file {} --nnodes {}:{} ...",
                  options.nodes.min, options.nodes.max, bound, d.term, d.reason, advertise,
                  bound.substr(bound.rfind(':') + 1), std::filesystem::absolute(options.keys_file).string(),
                  options.nodes.min, options.nodes.max);
        // Ranks started by srun/mpirun without agents use only the store (direct_launch.h).
        const std::string store = service->store_endpoint();
        log->info("direct launches (srun/mpirun, no agents): TENAX_RDZV_ENDPOINT=tcp://{}:{} TENAX_KEYS_FILE={}",
                  advertise, store.substr(store.rfind(':') + 1),
                  std::filesystem::absolute(options.keys_file).string());
      }
      const std::string now = describe(service->snapshot());
      if (now != last) log->info("{}", now);
      last = now;
    }
    if (service) {
      const auto final_state = service->snapshot();
      log->info("stopping on {}: {}; {} peer(s) refused for want of the job's keys", signal_name(signals.received()),
                describe(final_state), final_state.refused_peers);
      service->stop();
      if (keeper) keeper->release();
    } else {
      log->info("stopping on {} (standing by, never served)", signal_name(signals.received()));
    }
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
