#include "run_options.h"

#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "flag_values.h"

namespace tenax::launcher {
namespace {

constexpr const char* kExample = "tenax run --nproc-per-node 2 -- ./app --config run.toml";

constexpr const char* kCommand = "tenax run";

[[noreturn]] void usage_error(const std::string& message) { flag_error(kCommand, message); }

int parse_flag_int(const std::string& flag, const std::string& text, int min, const char* meaning,
                   const char* example) {
  return launcher::parse_flag_int(kCommand, flag, text, min, meaning, example);
}

const char* const kKnownFlags[] = {"--nproc-per-node", "--max-restarts",       "--run-dir",
                                   "--grace-period",   "--preempt-grace",      "--hang-timeout",
                                   "--nnodes",         "--node-id",            "--rdzv-endpoint",
                                   "--rdzv-host",      "--heartbeat-interval", "--heartbeat-liveness",
                                   "--join-timeout",   "--keys-file",          "--node-host",
                                   "--lease-timeout"};

bool is_known_flag(const std::string& name) {
  for (const char* flag : kKnownFlags) {
    if (name == flag) return true;
  }
  return false;
}

std::string known_flags() {
  std::string out;
  for (const char* flag : kKnownFlags) out += (out.empty() ? "" : ", ") + std::string(flag);
  return out;
}

// "host:port" (or "tcp://host:port") with a port in 0..65535.
std::string parse_endpoint(const std::string& text) {
  std::string rest = text.rfind("tcp://", 0) == 0 ? text.substr(6) : text;
  const auto colon = rest.rfind(':');
  const std::string port = colon == std::string::npos ? "" : rest.substr(colon + 1);
  if (colon == std::string::npos || colon == 0 || port.empty() ||
      port.find_first_not_of("0123456789") != std::string::npos || port.size() > 5 ||
      std::stoi(port) > 65535) {
    usage_error("--rdzv-endpoint expects HOST:PORT, got '" + text + "'; e.g. --rdzv-endpoint node01:29400");
  }
  return rest;
}

}  // namespace

RunOptions parse_run_options(const std::vector<std::string>& args) {
  RunOptions options;
  bool saw_nproc = false;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() > 1 && arg[0] == '-' && arg.rfind("--", 0) != 0) {
      usage_error("unknown flag " + arg +
                  "; flags are spelled with two dashes (see `tenax run --help`)");
    }
    if (arg.rfind("--", 0) != 0) {
      usage_error("unexpected argument '" + arg +
                  "' before `--`; put the program and its arguments after `--`, e.g. " + kExample);
    }
    std::string name = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    if (!is_known_flag(name)) {
      usage_error("unknown flag " + name + "; known flags: " + known_flags() + " (see `tenax run --help`)");
    }
    if (!value) {
      if (i + 1 >= args.size() || args[i + 1] == "--") {
        usage_error(name + " needs a value, e.g. " + name + " " +
                    (name == "--run-dir" ? "./tenax-run" : "2"));
      }
      value = args[++i];
    }
    if (name == "--nproc-per-node") {
      options.nproc_per_node = parse_flag_int(name, *value, 1, "a whole number of workers", "2");
      saw_nproc = true;
    } else if (name == "--max-restarts") {
      options.max_restarts = parse_flag_int(name, *value, 0, "a whole number of restarts", "3");
    } else if (name == "--grace-period") {
      options.grace_period =
          std::chrono::seconds(parse_flag_int(name, *value, 0, "a whole number of seconds", "5"));
    } else if (name == "--preempt-grace") {
      options.preempt_grace =
          std::chrono::seconds(parse_flag_int(name, *value, 0, "a whole number of seconds", "120"));
    } else if (name == "--hang-timeout") {
      options.hang_timeout =
          std::chrono::seconds(parse_flag_int(name, *value, 0, "a whole number of seconds", "600"));
    } else if (name == "--nnodes") {
      options.nnodes = parse_node_range(kCommand, *value);
    } else if (name == "--node-id") {
      if (value->empty() || value->size() > 100 ||
          value->find_first_of(" \t/") != std::string::npos) {
        usage_error("--node-id expects 1..100 characters without spaces or '/', got '" + *value +
                    "'; e.g. --node-id 0");
      }
      options.node_id = *value;
    } else if (name == "--rdzv-endpoint") {
      options.rdzv_endpoint = parse_endpoint(*value);
    } else if (name == "--rdzv-host") {
      if (*value == "yes" || *value == "true" || *value == "1") {
        options.rdzv_host = RdzvHosting::kYes;
      } else if (*value == "no" || *value == "false" || *value == "0") {
        options.rdzv_host = RdzvHosting::kNo;
      } else if (*value == "auto") {
        options.rdzv_host = RdzvHosting::kAuto;
      } else {
        usage_error("--rdzv-host expects yes, no or auto, got '" + *value + "'");
      }
    } else if (name == "--heartbeat-interval") {
      options.heartbeat_interval = std::chrono::milliseconds(
          parse_flag_int(name, *value, 10, "a whole number of milliseconds", "500"));
    } else if (name == "--heartbeat-liveness") {
      options.heartbeat_liveness = parse_flag_int(name, *value, 2, "a whole number of beats", "5");
    } else if (name == "--join-timeout") {
      options.join_timeout =
          std::chrono::seconds(parse_flag_int(name, *value, 1, "a whole number of seconds", "300"));
    } else if (name == "--node-host") {
      if (value->empty() || value->find_first_of(" \t/:") != std::string::npos) {
        usage_error("--node-host expects a host name or IPv4 address, got '" + *value + "'; e.g. --node-host node07");
      }
      options.node_host = *value;
    } else if (name == "--lease-timeout") {
      options.lease_timeout = std::chrono::milliseconds(
          parse_flag_int(name, *value, 10, "a whole number of milliseconds", "5000"));
    } else if (name == "--keys-file") {
      if (value->empty()) usage_error("--keys-file needs a file name, e.g. --keys-file ./tenax-job.keys");
      options.keys_file = *value;
    } else {  // --run-dir
      if (value->empty()) usage_error("--run-dir needs a directory, e.g. --run-dir ./tenax-run");
      options.run_dir = *value;
    }
  }
  if (i >= args.size()) {
    usage_error("missing `--` before the program to run; write: " + std::string(kExample));
  }
  options.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  if (options.command.empty()) {
    usage_error("no program after `--`; write: " + std::string(kExample));
  }
  if (options.command.front().empty()) usage_error("the program after `--` is an empty string");
  if (!saw_nproc) {
    usage_error("missing --nproc-per-node; say how many workers to start, e.g. " +
                std::string(kExample));
  }
  return options;
}

RunOptions parse_run_options(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_run_options(args);
}

bool run_help_requested(const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

std::filesystem::path find_program(const std::string& program) {
  namespace fs = std::filesystem;
  auto executable_file = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    if (!fs::exists(program, ec)) {
      usage_error("program '" + program + "' not found; check the path after `--`");
    }
    if (!executable_file(program)) {
      usage_error("program '" + program + "' is not an executable file; check its path and " +
                  "permissions (chmod +x)");
    }
    return program;
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "/usr/local/bin:/bin:/usr/bin";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (executable_file(candidate)) return candidate;
  }
  usage_error("program '" + program + "' not found in PATH; give its path (e.g. ./" + program +
              ") or fix PATH");
}

std::filesystem::path job_keys_path(const RunOptions& options) {
  if (!options.keys_file.empty()) return options.keys_file;
  // Per-node run directories ("out/run-%n") share the directory above the first one with %n.
  std::filesystem::path shared;
  for (const auto& part : options.run_dir) {
    if (part.string().find("%n") != std::string::npos) return shared / elastic::kJobKeysFileName;
    shared /= part;
  }
  return options.run_dir / elastic::kJobKeysFileName;
}

std::string run_usage() {
  std::ostringstream out;
  out << "Usage: tenax run --nproc-per-node N [options] -- PROGRAM [ARGS...]\n"
      << "\n"
      << "Starts N workers running PROGRAM on this node, hosts the rendezvous service, and\n"
      << "restarts all workers as a new generation when any of them fails.\n"
      << "\n"
      << "Options:\n"
      << "  --nproc-per-node N     workers to start (required, N >= 1)\n"
      << "  --max-restarts K       restarts before giving up (default " << kDefaultMaxRestarts
      << ")\n"
      << "  --run-dir DIR          run directory for agent.json; exported as TENAX_RUN_DIR\n"
      << "                         (default ./" << kDefaultRunDir << ", created if missing;\n"
      << "                         multi-node: %n in DIR is replaced by the node id)\n"
      << "  --grace-period SECONDS wait between SIGTERM and SIGKILL when stopping workers\n"
      << "                         (default " << kDefaultGracePeriod.count() << ")\n"
      << "  --preempt-grace SECONDS  time workers get to save a checkpoint after the agent\n"
      << "                         forwards SIGTERM/SIGINT/SIGUSR1 to them, before SIGKILL\n"
      << "                         (default " << kDefaultPreemptGrace.count() << "; match sbatch --signal=B:USR1@N)\n"
      << "  --hang-timeout SECONDS treat a worker as hung when the file named by its\n"
      << "                         TENAX_PROGRESS_FILE has not changed for this long (0 = off,\n"
      << "                         the default; a worker that never writes it is never hung)\n"
      << "\n"
      << "Multi-node (one agent per node; under srun the node id, node count and the first\n"
      << "host of SLURM_JOB_NODELIST are taken from the environment):\n"
      << "  --nnodes MIN:MAX       nodes a generation needs and may have (or N = N:N); the job\n"
      << "                         goes on while at least MIN nodes are alive\n"
      << "  --node-id ID           this node's id, unique in the job; numbers order the ranks\n"
      << "                         (default: SLURM_NODEID, else <hostname>-<pid>)\n"
      << "  --rdzv-endpoint HOST:PORT  the rendezvous service (default under Slurm: the first\n"
      << "                         host of the job, port 29400 + job id % 10000)\n"
      << "  --rdzv-host yes|no|auto  whether this agent hosts the rendezvous service (auto:\n"
      << "                         node id 0, or no --rdzv-endpoint given)\n"
      << "  --heartbeat-interval MS  agent <-> service heartbeat (default "
      << kDefaultAgentHeartbeat.count() << ")\n"
      << "  --heartbeat-liveness N   missed beats before a node is lost (default "
      << kDefaultAgentLiveness << ")\n"
      << "  --join-timeout SECONDS   fail when fewer than MIN nodes joined by then, and the\n"
      << "                         longest this agent waits for a rendezvous service (default "
      << kDefaultJoinTimeout.count() << ")\n"
      << "  --node-host ADDR       this node's address as the others reach it (its workers'\n"
      << "                         MASTER_ADDR as node rank 0, and its rendezvous endpoint if it\n"
      << "                         takes over hosting; default: Slurm node name, else hostname)\n"
      << "  --lease-timeout MS     the rendezvous host renews a lease in the job's directory; a\n"
      << "                         lease unrenewed this long is dead and the lowest live node of\n"
      << "                         the node list takes over (default: 2 x interval x liveness)\n"
      << "\n"
      << "Security: the rendezvous service and the key-value store speak ZeroMQ CURVE and admit\n"
      << "only peers holding the job's keys; others are refused and logged.\n"
      << "  --keys-file FILE       the job's keys (mode 0600; written by the agent hosting the\n"
      << "                         service if missing, read by the others and by the workers;\n"
      << "                         default: DIR/" << elastic::kJobKeysFileName << ", or, when DIR holds %n, beside\n"
      << "                         the first directory holding %n, where every node sees it)\n"
      << "  -h, --help             show this help\n"
      << "\n"
      << "Workers get RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
      << "MASTER_PORT, TENAX_GENERATION, TENAX_RESTART_COUNT, TENAX_RDZV_ENDPOINT,\n"
      << "TENAX_RUN_DIR and TENAX_KEYS_FILE, and inherit the rest of the environment.\n"
      << "\n"
      << "Exit status: 0 all workers finished; 1 failure (restart budget spent); 2 usage error;\n"
      << "3 preempted (every worker exited 0 or 3 after a forwarded signal, at least one 3);\n"
      << "130/143/138 stopped by SIGINT/SIGTERM/SIGUSR1 without a clean save.\n";
  return out.str();
}

}  // namespace tenax::launcher
