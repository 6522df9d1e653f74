#include "run_options.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <iterator>
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

const char* const kKnownFlags[] = {"--nproc-per-node",   "--max-restarts",       "--run-dir",
                                   "--grace-period",     "--preempt-grace",      "--hang-timeout",
                                   "--nnodes",           "--node-id",            "--rdzv-endpoint",
                                   "--rdzv-host",        "--heartbeat-interval", "--heartbeat-liveness",
                                   "--join-timeout",     "--keys-file",          "--node-host",
                                   "--lease-timeout",    "--rdzv-id",            "--monitor-interval",
                                   "--recovery",         "--spares"};

// Flags that take no value.
const char* const kSwitches[] = {"--standalone", "--module", "--no-python"};

// torchrun's flags that tenax run does not take, each with what to write instead. Spelled with
// dashes: torchrun takes --rdzv_backend and --rdzv-backend alike, and so are they matched.
struct TorchrunOnlyFlag {
  const char* name;
  const char* instead;
};
const TorchrunOnlyFlag kTorchrunOnlyFlags[] = {
    {"--rdzv-backend", "tenax run has its own authenticated rendezvous; drop it and keep --rdzv-endpoint"},
    {"--rdzv-conf", "set the rendezvous timing with --join-timeout, --heartbeat-interval and --heartbeat-liveness"},
    {"--master-addr",
     "the agent gives the workers MASTER_ADDR and MASTER_PORT (a free port, new each generation); drop it"},
    {"--master-port",
     "the agent gives the workers MASTER_ADDR and MASTER_PORT (a free port, new each generation); drop it"},
    {"--node-rank", "use --node-id (under srun it comes from SLURM_NODEID)"},
    {"--local-addr", "use --node-host"},
    {"--role", "workers get ROLE_NAME=default"},
    {"--log-dir", "workers write to the agent's stdout and stderr; redirect them in the job script"},
    {"--redirects", "workers write to the agent's stdout and stderr; redirect them in the job script"},
    {"--tee", "workers write to the agent's stdout and stderr; redirect them in the job script"},
    {"--local-ranks-filter", "workers write to the agent's stdout and stderr; filter in the job script"},
    {"--logs-specs", "workers write to the agent's stdout and stderr; redirect them in the job script"},
    {"--start-method", "workers are always separate processes; drop it"},
    {"--run-path", "give the script (SCRIPT.py) or -m MODULE"},
};

bool listed(const char* const* begin, const char* const* end, const std::string& name) {
  for (auto it = begin; it != end; ++it) {
    if (name == *it) return true;
  }
  return false;
}
bool is_known_flag(const std::string& name) {
  return listed(std::begin(kKnownFlags), std::end(kKnownFlags), name);
}
bool is_switch(const std::string& name) { return listed(std::begin(kSwitches), std::end(kSwitches), name); }

std::string known_flags() {
  std::string out;
  for (const char* flag : kKnownFlags) out += (out.empty() ? "" : ", ") + std::string(flag);
  for (const char* flag : kSwitches) out += ", " + std::string(flag);
  return out + ", -m";
}

// torchrun's spelling in ours: "--nproc_per_node" → "--nproc-per-node"; "-m" → "--module".
std::string canonical_flag(const std::string& name) {
  if (name == "-m") return "--module";
  if (name == "-r") return "--redirects";
  if (name == "-t") return "--tee";
  std::string out = name;
  for (std::size_t i = 2; i < out.size(); ++i) {
    if (out[i] == '_') out[i] = '-';
  }
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

// --monitor-interval SECONDS, as torchrun writes it (0.02); kept to whole milliseconds.
std::chrono::milliseconds parse_monitor_interval(const std::string& flag, const std::string& text) {
  double seconds = 0;
  std::size_t used = 0;
  try {
    seconds = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !(seconds >= 0.001 && seconds <= 3600)) {
    usage_error(flag + " expects seconds between 0.001 and 3600, got '" + text + "'; e.g. " + flag + " 0.02");
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000 + 0.5));
}

// The worker command from the arguments after the flags (`rest`, which starts with the program).
std::vector<std::string> program_command(std::vector<std::string> rest, bool module, bool no_python,
                                         bool after_double_dash) {
  if (module) {
    rest.insert(rest.begin(), {std::string(kPythonInterpreter), "-u", "-m"});
    return rest;
  }
  const std::string& program = rest.front();
  const bool python_script = program.size() > 3 && program.compare(program.size() - 3, 3, ".py") == 0;
  if (after_double_dash || no_python) return rest;
  if (!python_script) {
    usage_error("unexpected argument '" + program +
                "' before `--`; put the program and its arguments after `--`, e.g. " + kExample +
                " (or, as with torchrun: a Python script ending in .py, -m MODULE, or --no-python PROGRAM)");
  }
  // torchrun runs a script with its interpreter, unbuffered, so that lines reach the log at once.
  rest.insert(rest.begin(), {std::string(kPythonInterpreter), "-u"});
  return rest;
}

}  // namespace

RunOptions parse_run_options(const std::vector<std::string>& args) {
  RunOptions options;
  bool saw_nproc = false;
  bool module = false;
  bool no_python = false;
  bool after_double_dash = false;
  std::size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      after_double_dash = true;
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-' || arg == "-") break;  // the program (torchrun's form)
    std::string written = arg;
    std::optional<std::string> value;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      written = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    const std::string name = canonical_flag(written);
    for (const TorchrunOnlyFlag& t : kTorchrunOnlyFlags) {
      if (name == t.name) usage_error("torchrun's flag " + written + " is not one of tenax run's: " + t.instead);
    }
    if (arg.rfind("--", 0) != 0 && name == written) {
      usage_error("unknown flag " + written + "; flags are spelled with two dashes (see `tenax run --help`)");
    }
    if (is_switch(name)) {
      if (value) usage_error(written + " takes no value; write " + written + " alone");
      if (name == "--standalone") options.standalone = true;
      if (name == "--module") module = true;
      if (name == "--no-python") no_python = true;
      continue;
    }
    if (!is_known_flag(name)) {
      usage_error("unknown flag " + written + "; known flags: " + known_flags() + " (see `tenax run --help`)");
    }
    if (!value) {
      if (i + 1 >= args.size() || args[i + 1] == "--") {
        usage_error(written + " needs a value, e.g. " + written + " " + (name == "--run-dir" ? "./tenax-run" : "2"));
      }
      value = args[++i];
    }
    if (name == "--nproc-per-node") {
      if (*value == "auto" || *value == "gpu" || *value == "cpu" || *value == "xpu") {
        usage_error(written + " expects a whole number of workers, got '" + *value +
                    "' (torchrun's device-dependent counts are not supported); e.g. " + written + " 4");
      }
      options.nproc_per_node = parse_flag_int(written, *value, 1, "a whole number of workers", "2");
      saw_nproc = true;
    } else if (name == "--max-restarts") {
      options.max_restarts = parse_flag_int(written, *value, 0, "a whole number of restarts", "3");
    } else if (name == "--grace-period") {
      options.grace_period =
          std::chrono::seconds(parse_flag_int(written, *value, 0, "a whole number of seconds", "5"));
    } else if (name == "--preempt-grace") {
      options.preempt_grace =
          std::chrono::seconds(parse_flag_int(written, *value, 0, "a whole number of seconds", "120"));
    } else if (name == "--hang-timeout") {
      options.hang_timeout =
          std::chrono::seconds(parse_flag_int(written, *value, 0, "a whole number of seconds", "600"));
    } else if (name == "--recovery") {
      if (*value == "in-process") {
        options.recovery = RecoveryMode::kInProcess;
      } else if (*value == "restart") {
        options.recovery = RecoveryMode::kRestart;
      } else {
        usage_error("--recovery expects in-process or restart, got '" + *value + "'; e.g. --recovery in-process");
      }
    } else if (name == "--spares") {
      options.spares = parse_flag_int(written, *value, 0, "a whole number of warm spare workers", "1");
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
    } else if (name == "--rdzv-id") {
      if (value->empty() || value->size() > 200 || value->find_first_of(" \t\n") != std::string::npos) {
        usage_error(written + " expects 1..200 characters without spaces, got '" + *value + "'; e.g. " + written +
                    " $SLURM_JOB_ID");
      }
      options.rdzv_id = *value;
    } else if (name == "--monitor-interval") {
      options.monitor_interval = parse_monitor_interval(written, *value);
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
          parse_flag_int(written, *value, 10, "a whole number of milliseconds", "500"));
    } else if (name == "--heartbeat-liveness") {
      options.heartbeat_liveness = parse_flag_int(written, *value, 2, "a whole number of beats", "5");
    } else if (name == "--join-timeout") {
      options.join_timeout =
          std::chrono::seconds(parse_flag_int(written, *value, 1, "a whole number of seconds", "300"));
    } else if (name == "--node-host") {
      if (value->empty() || value->find_first_of(" \t/:") != std::string::npos) {
        usage_error("--node-host expects a host name or IPv4 address, got '" + *value + "'; e.g. --node-host node07");
      }
      options.node_host = *value;
    } else if (name == "--lease-timeout") {
      options.lease_timeout = std::chrono::milliseconds(
          parse_flag_int(written, *value, 10, "a whole number of milliseconds", "5000"));
    } else if (name == "--keys-file") {
      if (value->empty()) usage_error("--keys-file needs a file name, e.g. --keys-file ./tenax-job.keys");
      options.keys_file = *value;
    } else {  // --run-dir
      if (value->empty()) usage_error("--run-dir needs a directory, e.g. --run-dir ./tenax-run");
      options.run_dir = *value;
    }
  }
  if (i >= args.size()) {
    if (module) usage_error("-m needs a module to run, e.g. -m mypackage.train --lr 0.1");
    if (after_double_dash) usage_error("no program after `--`; write: " + std::string(kExample));
    usage_error("missing `--` before the program to run; write: " + std::string(kExample));
  }
  if (args[i].empty()) usage_error("the program after `--` is an empty string");
  options.command = program_command(std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(i), args.end()),
                                    module, no_python, after_double_dash);
  if (module && no_python) usage_error("-m (--module) and --no-python exclude each other: a module runs in python3");
  if (options.standalone) {
    if (!options.rdzv_endpoint.empty()) {
      usage_error("--standalone runs one node with its own rendezvous; drop --rdzv-endpoint " +
                  options.rdzv_endpoint + " (or --standalone for a multi-node job)");
    }
    if (options.nnodes && options.nnodes->max != 1) {
      usage_error("--standalone runs one node, but --nnodes allows " + std::to_string(options.nnodes->max) +
                  "; drop one of them");
    }
    options.nnodes.reset();  // --nnodes 1 with --standalone: the single-node agent
  }
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
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h") return true;
    if (arg.empty() || arg[0] != '-') return false;  // the program (torchrun's form): the rest is its own
    if (arg.find('=') == std::string::npos && is_known_flag(canonical_flag(arg))) ++i;  // skip the value
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
      << "       tenax run --nproc-per-node N [options] SCRIPT.py [ARGS...]   (python3 -u SCRIPT.py)\n"
      << "       tenax run --nproc-per-node N [options] -m MODULE [ARGS...]   (python3 -u -m MODULE)\n"
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
      << "  --recovery MODE        what a lost worker costs the others: in-process (the other\n"
      << "                         workers keep their processes and state, the lost rank is\n"
      << "                         replaced and heals from a peer's memory; programs built on\n"
      << "                         tenax::sdk::Trainer; a lost node shrinks the world) or\n"
      << "                         restart (every worker restarts from the newest\n"
      << "                         checkpoint; the default)\n"
      << "  --spares K             with --recovery in-process: warm spare workers kept started\n"
      << "                         (libtorch and the program loaded) to take a lost rank's place\n"
      << "                         (default " << kDefaultSpares << "; 0: a new process is started instead)\n"
      << "  --monitor-interval SECONDS  how often the agent checks its workers (default "
      << kDefaultMonitorInterval.count() / 1000.0 << ")\n"
      << "  --rdzv-id ID           the job's id, given to the workers as TORCHELASTIC_RUN_ID\n"
      << "                         (default: the Slurm job id, else none)\n"
      << "  --standalone           one node with its own rendezvous, even under srun\n"
      << "  -m, --module           run the program as a Python module: python3 -u -m MODULE\n"
      << "  --no-python            run the program given without `--` directly, not in python3\n"
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
      << "torchrun's spellings work too: --nproc_per_node, --nnodes, --max_restarts, --rdzv_endpoint,\n"
      << "--rdzv_id, --monitor_interval, --standalone, -m; its other flags are refused by name.\n"
      << "\n"
      << "Workers get torchrun's environment: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
      << "GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR,\n"
      << "MASTER_PORT (a free port for rank 0 to host PyTorch's store, new each generation),\n"
      << "TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,\n"
      << "TORCHELASTIC_USE_AGENT_STORE=False and TORCH_NCCL_ASYNC_ERROR_HANDLING (1 unless set), so\n"
      << "init_process_group(init_method=\"env://\") works; plus TENAX_GENERATION,\n"
      << "TENAX_RESTART_COUNT, TENAX_RDZV_ENDPOINT (Tenax's own store), TENAX_RUN_DIR,\n"
      << "TENAX_KEYS_FILE and TENAX_FENCE_DIR, and inherit the rest of the environment.\n"
      << "\n"
      << "Exit status: 0 all workers finished; 1 failure (restart budget spent); 2 usage error;\n"
      << "3 preempted (every worker exited 0 or 3 after a forwarded signal, at least one 3);\n"
      << "130/143/138 stopped by SIGINT/SIGTERM/SIGUSR1 without a clean save.\n";
  return out.str();
}

}  // namespace tenax::launcher
