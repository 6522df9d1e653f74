#include "rdzv_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <iostream>
#include <optional>
#include <utility>

#include <unistd.h>

#include "command_flags.h"
#include "exit_status.h"
#include "generation_claim.h"
#include "shutdown_signals.h"
#include "tenax/core/endpoint.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/host_election.h"
#include "tenax/elastic/rendezvous_lease.h"
#include "tenax/elastic/rendezvous_service.h"

namespace tenax::launcher {
namespace {

constexpr const char* kCommand = "tenax rdzv";

std::string joined(const std::vector<std::string>& names) {
  const std::string out = fmt::format("{}", fmt::join(names, ","));
  return out.empty() ? "-" : out;
}

// One line per change an operator cares about: who is in, who waits, what was refused.
std::string describe(const elastic::RendezvousSnapshot& s) {
  std::string out = fmt::format(
      "generation {}: members {} ({} workers), live {}, waiting {}, finished {}, nodes lost {}", s.generation,
      joined(s.members), s.world_size, joined(s.live), joined(s.waiting), joined(s.finished), s.nodes_lost);
  if (s.restart_requested) out += fmt::format("; ending: {}", s.restart_reason);
  if (!s.last_failure.empty()) out += fmt::format("; last failed round: {}", s.last_failure);
  return out;
}

// Every flag of `tenax rdzv`, once: its parsing into `o` and its line of --help.
void declare_rdzv_flags(CommandFlags& flags, RdzvOptions& o, bool& nnodes_given) {
  flags.describe(
      "Usage: tenax rdzv --nnodes MIN:MAX [options]\n"
      "\n"
      "Serves the rendezvous (membership, heartbeats, the workers' key-value store) of one job\n"
      "on its own, until SIGINT/SIGTERM. The job's agents then run\n"
      "  tenax run --rdzv-endpoint THIS_HOST:PORT --rdzv-host no --keys-file FILE --nnodes MIN:MAX ...\n",
      fmt::format("Failover: the serving instance holds a lease ({}) beside the keys file;\n"
                  "start one instance per candidate host, each with its own --position, sharing that\n"
                  "directory: position 0 serves, the others stand by and the lowest takes over when the lease\n"
                  "is not renewed for the lease timeout. Agents started with --rdzv-host no follow the lease.\n",
                  elastic::kLeaseFileName));
  flags.value("--nnodes", "MIN:MAX", "1:2", "nodes a generation needs and may have (required)",
              [&](const std::string& v) {
                o.nodes = parse_node_range(kCommand, v);
                nnodes_given = true;
              });
  flags.value("--host", "ADDR", "'*'", "address to bind (default * = every interface)", [&](const std::string& v) {
    if (v.empty()) flags.fail("--host needs an address to bind, e.g. --host '*' or --host 10.0.0.5");
    o.host = v;
  });
  flags.value("--port", "P", "29400",
              fmt::format("membership port (default {}; the store takes any free port)", kDefaultRdzvPort),
              [&](const std::string& v) {
                o.port = flags.flag_int(v, {0, "a TCP port (0: any free one)", "29400"});
                if (o.port > 65535) flags.fail(fmt::format("--port must be at most 65535, got {}", v));
              });
  flags.value("--keys-file", "FILE", "/shared/job/tenax-job.keys",
              fmt::format("the job's CURVE keys, written (mode 0600) if missing (default ./{});\n"
                          "the agents and workers need the same file",
                          elastic::kJobKeysFileName),
              [&](const std::string& v) {
                if (v.empty()) flags.fail("--keys-file needs a file name, e.g. --keys-file /shared/job/tenax-job.keys");
                o.keys_file = v;
              });
  flags.whole("--last-call", "SECONDS", {0, "whole seconds", "3"}, o.last_call,
              "once MIN nodes joined, how long to wait for more (default 3)");
  flags.whole("--join-timeout", "SECONDS", {1, "whole seconds", "300"}, o.join_timeout,
              "fail a round with fewer than MIN nodes by then (default 300)");
  flags.whole("--heartbeat-interval", "MS", {10, "whole milliseconds", "500"}, o.heartbeat_interval,
              "agent <-> service heartbeat (default 500)");
  flags.whole("--heartbeat-liveness", "N", {2, "a whole number of beats", "5"}, o.heartbeat_liveness,
              "missed beats before a node is lost (default 5)");
  flags.section("Failover (one instance per candidate host, see below)");
  flags.whole("--position", "N", {0, "a whole number (0 serves first)", "1"}, o.position,
              "this candidate's place (default 0: serves first)");
  flags.value("--advertise", "HOST", "rdzv01", "the address agents connect to (default: --host, or this host's name)",
              [&](const std::string& v) {
                if (v.empty() || v.find_first_of(" \t/:") != std::string::npos) {
                  flags.fail("--advertise expects a host name or address the agents reach, e.g. --advertise rdzv01");
                }
                o.advertise = v;
              });
  flags.whole("--lease-timeout", "MS", {10, "whole milliseconds", "5000"}, o.lease_timeout,
              "a lease unrenewed this long is dead (default 2 x interval x liveness)");
}

// The flags of `tenax rdzv` declared over the options they fill in.
struct RdzvFlags {
  RdzvOptions options;
  bool nnodes_given = false;
  CommandFlags flags{kCommand, Spelling::kExact};
  RdzvFlags() { declare_rdzv_flags(flags, options, nnodes_given); }
};

}  // namespace

RdzvOptions parse_rdzv_options(const std::vector<std::string>& args) {
  RdzvFlags rdzv;
  const CommandFlags::Stop stop = rdzv.flags.parse(args);
  if (stop.kind != CommandFlags::Stop::Kind::kEnd) {
    const std::string what = stop.kind == CommandFlags::Stop::Kind::kUnknownFlag  ? stop.flag
                             : stop.kind == CommandFlags::Stop::Kind::kDoubleDash ? "--"
                                                                                  : args[stop.at];
    flag_error(kCommand, fmt::format("unknown argument '{}' (see `tenax rdzv --help`)", what));
  }
  if (!rdzv.nnodes_given) {
    flag_error(kCommand, "missing --nnodes; say how many nodes a generation needs, e.g. --nnodes 1:2");
  }
  return std::move(rdzv.options);
}

std::string rdzv_usage() { return RdzvFlags().flags.help(); }

int run_rdzv_command(const std::vector<std::string>& args) {
  if (RdzvFlags().flags.help_requested(args)) {
    std::cout << rdzv_usage();
    return kExitDone;
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
    const std::string advertise = !options.advertise.empty() ? options.advertise
                                  : options.host != "*"      ? options.host
                                                             : std::string(hostname);
    const std::string node = fmt::format("rdzv-{}", options.position);
    elastic::HostElection election(
        node, elastic::HostElectionOptions(options.position, lease_timeout).stagger_step(heartbeat.interval() * 2));
    auto unix_ms = [] {
      return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
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
        const Endpoint bound =
            Endpoint::parse(service->start(Endpoint{options.host, options.port}.str()), /*allow_any_port=*/true);
        elastic::LeaseRecord record;
        record.term = d.term;
        record.holder = node;
        record.endpoint = bound.with_host(advertise).str();
        record.generation = election.highest_generation();
        if (!lease_file.claim(record)) {
          service.reset();
          continue;
        }
        elastic::RendezvousService* raw = &*service;
        keeper = std::make_unique<elastic::LeaseKeeper>(lease_file, record, heartbeat.interval(),
                                                        [raw] { return raw->snapshot().generation; });
        log->info(
            "serving {}..{} node(s) at {} (lease term {}: {}); agents: tenax run --rdzv-endpoint {}:{} "
            "--rdzv-host no --keys-file {} --nnodes {}:{} ...",
            options.nodes.min, options.nodes.max, bound.str(), d.term, d.reason, advertise, bound.port,
            std::filesystem::absolute(options.keys_file).string(), options.nodes.min, options.nodes.max);
        // Ranks started by srun/mpirun without agents use only the store (direct_launch.h).
        const Endpoint store = Endpoint::parse(service->store_endpoint(), /*allow_any_port=*/true);
        log->info("direct launches (srun/mpirun, no agents): TENAX_RDZV_ENDPOINT={} TENAX_KEYS_FILE={}",
                  store.with_host(advertise).str(), std::filesystem::absolute(options.keys_file).string());
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
    return kExitDone;
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\nRun `tenax rdzv --help` for usage.\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    log->error("{}", e.what());
    return kExitFailure;
  }
}

}  // namespace tenax::launcher
