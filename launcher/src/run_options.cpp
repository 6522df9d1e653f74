#include "run_options.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "command_flags.h"
#include "tenax/core/endpoint.h"
#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

constexpr const char* kExample = "tenax run --nproc-per-node 2 -- ./app --config run.toml";

constexpr const char* kCommand = "tenax run";

[[noreturn]] void usage_error(const std::string& message) { flag_error(kCommand, message); }

// What the flags say beyond RunOptions: how the program is to be run, and whether the one
// required flag was given.
struct ProgramForm {
  bool nproc_given = false;
  bool module = false;     // -m MODULE: python3 -u -m MODULE
  bool no_python = false;  // --no-python PROGRAM: the program itself
};

// Sets `out` to the value of the word `text` is; false when it is none of `words`.
template <class T>
bool pick(const std::string& text, std::initializer_list<std::pair<const char*, T>> words, T& out) {
  for (const auto& [word, value] : words) {
    if (text == word) {
      out = value;
      return true;
    }
  }
  return false;
}

// "host:port" (or "tcp://host:port") with a port in 0..65535.
std::string parse_endpoint(const std::string& text) {
  try {
    return Endpoint::parse(text, /*allow_any_port=*/true).host_port();
  } catch (const ConfigError&) {
    usage_error(fmt::format("--rdzv-endpoint expects HOST:PORT, got '{}'; e.g. --rdzv-endpoint node01:29400", text));
  }
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
    usage_error(fmt::format("{0} expects seconds between 0.001 and 3600, got '{1}'; e.g. {0} 0.02", flag, text));
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000 + 0.5));
}

// Every flag of `tenax run`, once: its parsing into `o` and `form`, and its lines of --help.
void declare_run_flags(CommandFlags& flags, RunOptions& o, ProgramForm& form) {
  flags.describe(
      "Usage: tenax run --nproc-per-node N [options] -- PROGRAM [ARGS...]\n"
      "       tenax run --nproc-per-node N [options] SCRIPT.py [ARGS...]   (python3 -u SCRIPT.py)\n"
      "       tenax run --nproc-per-node N [options] -m MODULE [ARGS...]   (python3 -u -m MODULE)\n"
      "\n"
      "Starts N workers running PROGRAM on this node, hosts the rendezvous service, and\n"
      "restarts all workers as a new generation when any of them fails.\n",
      "torchrun's spellings work too: --nproc_per_node, --nnodes, --max_restarts, --rdzv_endpoint,\n"
      "--rdzv_id, --monitor_interval, --standalone, -m; its other flags are refused by name.\n"
      "\n"
      "Workers get torchrun's environment: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,\n"
      "GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR,\n"
      "MASTER_PORT (a free port for rank 0 to host PyTorch's store, new each generation),\n"
      "TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID,\n"
      "TORCHELASTIC_USE_AGENT_STORE=False and TORCH_NCCL_ASYNC_ERROR_HANDLING (1 unless set), so\n"
      "init_process_group(init_method=\"env://\") works; plus TENAX_GENERATION,\n"
      "TENAX_RESTART_COUNT, TENAX_RDZV_ENDPOINT (Tenax's own store), TENAX_RUN_DIR,\n"
      "TENAX_KEYS_FILE and TENAX_FENCE_DIR, and inherit the rest of the environment.\n"
      "\n"
      "Exit status: 0 all workers finished; 1 failure (restart budget spent); 2 usage error;\n"
      "3 preempted (every worker exited 0 or 3 after a forwarded signal, at least one 3);\n"
      "130/143/138 stopped by SIGINT/SIGTERM/SIGUSR1 without a clean save.\n");

  flags.value("--nproc-per-node", "N", "2", "workers to start (required, N >= 1)", [&](const std::string& v) {
    if (v == "auto" || v == "gpu" || v == "cpu" || v == "xpu") {
      flags.fail(
          fmt::format("{0} expects a whole number of workers, got '{1}' (torchrun's device-dependent "
                      "counts are not supported); e.g. {0} 4",
                      flags.current_flag(), v));
    }
    o.nproc_per_node = flags.flag_int(v, {1, "a whole number of workers", "2"});
    form.nproc_given = true;
  });
  flags.whole("--max-restarts", "K", {0, "a whole number of restarts", "3"}, o.max_restarts,
              fmt::format("restarts before giving up (default {})", kDefaultMaxRestarts));
  flags.value("--run-dir", "DIR", "./tenax-run",
              fmt::format("run directory for agent.json; exported as TENAX_RUN_DIR\n"
                          "(default ./{}, created if missing;\n"
                          "multi-node: %n in DIR is replaced by the node id)",
                          kDefaultRunDir),
              [&](const std::string& v) {
                if (v.empty()) flags.fail("--run-dir needs a directory, e.g. --run-dir ./tenax-run");
                o.run_dir = v;
              });
  flags.whole(
      "--grace-period", "SECONDS", {0, "a whole number of seconds", "5"}, o.grace_period,
      fmt::format("wait between SIGTERM and SIGKILL when stopping workers\n(default {})", kDefaultGracePeriod.count()));
  flags.whole("--preempt-grace", "SECONDS", {0, "a whole number of seconds", "120"}, o.preempt_grace,
              fmt::format("time workers get to save a checkpoint after the agent\n"
                          "forwards SIGTERM/SIGINT/SIGUSR1 to them, before SIGKILL\n"
                          "(default {}; match sbatch --signal=B:USR1@N)",
                          kDefaultPreemptGrace.count()));
  flags.whole("--hang-timeout", "SECONDS", {0, "a whole number of seconds", "600"}, o.hang_timeout,
              "treat a worker as hung when the file named by its\n"
              "TENAX_PROGRESS_FILE has not changed for this long (0 = off,\n"
              "the default; a worker that never writes it is never hung)");
  flags.value(
      "--recovery", "MODE", "in-process",
      "what a lost worker costs the others: in-process (the other\n"
      "workers keep their processes and state, the lost rank is\n"
      "replaced and heals from a peer's memory; programs built on\n"
      "tenax::sdk::Trainer; a lost node shrinks the world) or\n"
      "restart (every worker restarts from the newest\n"
      "checkpoint; the default)",
      [&](const std::string& v) {
        if (!pick(v, {{"in-process", RecoveryMode::kInProcess}, {"restart", RecoveryMode::kRestart}}, o.recovery)) {
          flags.fail(fmt::format("--recovery expects in-process or restart, got '{}'; e.g. --recovery in-process", v));
        }
      });
  flags.whole("--spares", "K", {0, "a whole number of warm spare workers", "1"}, o.spares,
              fmt::format("with --recovery in-process: warm spare workers kept started\n"
                          "(libtorch and the program loaded) to take a lost rank's place\n"
                          "(default {}; 0: a new process is started instead)",
                          kDefaultSpares));
  flags.value(
      "--monitor-interval", "SECONDS", "0.02",
      fmt::format("how often the agent checks its workers (default {})", kDefaultMonitorInterval.count() / 1000.0),
      [&](const std::string& v) { o.monitor_interval = parse_monitor_interval(flags.current_flag(), v); });
  flags.value(
      "--rdzv-id", "ID", "$SLURM_JOB_ID",
      "the job's id, given to the workers as TORCHELASTIC_RUN_ID\n(default: the Slurm job id, else none)",
      [&](const std::string& v) {
        if (v.empty() || v.size() > 200 || v.find_first_of(" \t\n") != std::string::npos) {
          flags.fail(fmt::format("{0} expects 1..200 characters without spaces, got '{1}'; e.g. {0} $SLURM_JOB_ID",
                                 flags.current_flag(), v));
        }
        o.rdzv_id = v;
      });
  flags.flag("--standalone", "one node with its own rendezvous, even under srun", [&] { o.standalone = true; });
  flags.flag("-m,--module", "run the program as a Python module: python3 -u -m MODULE", [&] { form.module = true; });
  flags.flag("--no-python", "run the program given without `--` directly, not in python3",
             [&] { form.no_python = true; });

  flags.section("Multi-node (one agent per node; under srun: node id, node count and first host from Slurm)");
  flags.value("--nnodes", "MIN:MAX", "1:2",
              "nodes a generation needs and may have (or N = N:N); the job\n"
              "goes on while at least MIN nodes are alive",
              [&](const std::string& v) { o.nnodes = parse_node_range(kCommand, v); });
  flags.value("--node-id", "ID", "0",
              "this node's id, unique in the job; numbers order the ranks\n"
              "(default: SLURM_NODEID, else <hostname>-<pid>)",
              [&](const std::string& v) {
                if (v.empty() || v.size() > 100 || v.find_first_of(" \t/") != std::string::npos) {
                  flags.fail(
                      fmt::format("--node-id expects 1..100 characters without spaces or '/', got '{}'; "
                                  "e.g. --node-id 0",
                                  v));
                }
                o.node_id = v;
              });
  flags.value("--rdzv-endpoint", "HOST:PORT", "node01:29400",
              "the rendezvous service (default under Slurm: the first\n"
              "host of the job, port 29400 + job id % 10000)",
              [&](const std::string& v) { o.rdzv_endpoint = parse_endpoint(v); });
  flags.value("--rdzv-host", "yes|no|auto", "auto",
              "whether this agent hosts the rendezvous service (auto:\n"
              "node id 0, or no --rdzv-endpoint given)",
              [&](const std::string& v) {
                const RdzvHosting yes = RdzvHosting::kYes, no = RdzvHosting::kNo;
                if (!pick(v,
                          {{"yes", yes},
                           {"true", yes},
                           {"1", yes},
                           {"no", no},
                           {"false", no},
                           {"0", no},
                           {"auto", RdzvHosting::kAuto}},
                          o.rdzv_host)) {
                  flags.fail(fmt::format("--rdzv-host expects yes, no or auto, got '{}'", v));
                }
              });
  flags.whole("--heartbeat-interval", "MS", {10, "a whole number of milliseconds", "500"}, o.heartbeat_interval,
              fmt::format("agent <-> service heartbeat (default {})", kDefaultAgentHeartbeat.count()));
  flags.whole("--heartbeat-liveness", "N", {2, "a whole number of beats", "5"}, o.heartbeat_liveness,
              fmt::format("missed beats before a node is lost (default {})", kDefaultAgentLiveness));
  flags.whole("--join-timeout", "SECONDS", {1, "a whole number of seconds", "300"}, o.join_timeout,
              fmt::format("fail when fewer than MIN nodes joined by then, and the\n"
                          "longest this agent waits for a rendezvous service (default {})",
                          kDefaultJoinTimeout.count()));
  flags.value("--node-host", "ADDR", "node07",
              "this node's address as the others reach it (its workers'\n"
              "MASTER_ADDR as node rank 0, and its rendezvous endpoint if it\n"
              "takes over hosting; default: Slurm node name, else hostname)",
              [&](const std::string& v) {
                if (v.empty() || v.find_first_of(" \t/:") != std::string::npos) {
                  flags.fail(fmt::format(
                      "--node-host expects a host name or IPv4 address, got '{}'; e.g. --node-host node07", v));
                }
                o.node_host = v;
              });
  flags.whole("--lease-timeout", "MS", {10, "a whole number of milliseconds", "5000"}, o.lease_timeout,
              "the rendezvous host renews a lease in the job's directory; a\n"
              "lease unrenewed this long is dead and the lowest live node of\n"
              "the node list takes over (default: 2 x interval x liveness)");

  flags.section("Security (ZeroMQ CURVE: the rendezvous and key-value store admit only holders of the job's keys)");
  flags.value("--keys-file", "FILE", "./tenax-job.keys",
              fmt::format("the job's keys (mode 0600; written by the agent hosting the\n"
                          "service if missing, read by the others and by the workers;\n"
                          "default: DIR/{}, or, when DIR holds %n, beside\n"
                          "the first directory holding %n, where every node sees it)",
                          elastic::kJobKeysFileName),
              [&](const std::string& v) {
                if (v.empty()) flags.fail("--keys-file needs a file name, e.g. --keys-file ./tenax-job.keys");
                o.keys_file = v;
              });

  // torchrun's flags that tenax run does not take, each with what to write instead: a job script
  // moved from torchrun fails loudly, not subtly. Matched with dashes or underscores, as torchrun does.
  flags.section("torchrun's flags that tenax run refuses, and what to write instead");
  const char* const kWorkerOutput = "workers write to the agent's stdout and stderr; redirect them in the job script";
  const char* const kMaster =
      "the agent gives the workers MASTER_ADDR and MASTER_PORT (a free port, new each generation); drop it";
  flags.refuse("--rdzv-backend", "tenax run has its own authenticated rendezvous; drop it and keep --rdzv-endpoint");
  flags.refuse("--rdzv-conf",
               "set the rendezvous timing with --join-timeout, --heartbeat-interval and --heartbeat-liveness");
  flags.refuse("--master-addr", kMaster);
  flags.refuse("--master-port", kMaster);
  flags.refuse("--node-rank", "use --node-id (under srun it comes from SLURM_NODEID)");
  flags.refuse("--local-addr", "use --node-host");
  flags.refuse("--role", "workers get ROLE_NAME=default");
  flags.refuse("--log-dir", kWorkerOutput);
  flags.refuse("-r,--redirects", kWorkerOutput);
  flags.refuse("-t,--tee", kWorkerOutput);
  flags.refuse("--local-ranks-filter", "workers write to the agent's stdout and stderr; filter in the job script");
  flags.refuse("--logs-specs", kWorkerOutput);
  flags.refuse("--start-method", "workers are always separate processes; drop it");
  flags.refuse("--run-path", "give the script (SCRIPT.py) or -m MODULE");
}

// The flags of `tenax run` declared over the options they fill in.
struct RunFlags {
  RunOptions options;
  ProgramForm form;
  CommandFlags flags{kCommand, Spelling::kTorchrun};
  RunFlags() { declare_run_flags(flags, options, form); }
};

// The worker command from the arguments after the flags (`rest`, which starts with the program).
std::vector<std::string> program_command(std::vector<std::string> rest, const ProgramForm& form,
                                         bool after_double_dash) {
  if (form.module) {
    rest.insert(rest.begin(), {std::string(kPythonInterpreter), "-u", "-m"});
    return rest;
  }
  const std::string& program = rest.front();
  const bool python_script = program.size() > 3 && program.compare(program.size() - 3, 3, ".py") == 0;
  if (after_double_dash || form.no_python) return rest;
  if (!python_script) {
    usage_error(
        fmt::format("unexpected argument '{}' before `--`; put the program and its arguments after `--`, "
                    "e.g. {} (or, as with torchrun: a Python script ending in .py, -m MODULE, or "
                    "--no-python PROGRAM)",
                    program, kExample));
  }
  // torchrun runs a script with its interpreter, unbuffered, so that lines reach the log at once.
  rest.insert(rest.begin(), {std::string(kPythonInterpreter), "-u"});
  return rest;
}

}  // namespace

RunOptions parse_run_options(const std::vector<std::string>& args) {
  RunFlags run;
  RunOptions& options = run.options;
  const ProgramForm& form = run.form;
  const CommandFlags::Stop stop = run.flags.parse(args);
  if (stop.kind == CommandFlags::Stop::Kind::kUnknownFlag) {
    if (stop.flag.rfind("--", 0) != 0) {
      usage_error(
          fmt::format("unknown flag {}; flags are spelled with two dashes (see `tenax run --help`)", stop.flag));
    }
    usage_error(
        fmt::format("unknown flag {}; known flags: {} (see `tenax run --help`)", stop.flag, run.flags.known_flags()));
  }
  const bool after_double_dash = stop.kind == CommandFlags::Stop::Kind::kDoubleDash;
  if (stop.at >= args.size()) {
    if (form.module) usage_error("-m needs a module to run, e.g. -m mypackage.train --lr 0.1");
    if (after_double_dash) usage_error(fmt::format("no program after `--`; write: {}", kExample));
    usage_error(fmt::format("missing `--` before the program to run; write: {}", kExample));
  }
  if (args[stop.at].empty()) usage_error("the program after `--` is an empty string");
  options.command =
      program_command(std::vector<std::string>(args.begin() + static_cast<std::ptrdiff_t>(stop.at), args.end()), form,
                      after_double_dash);
  if (form.module && form.no_python) {
    usage_error("-m (--module) and --no-python exclude each other: a module runs in python3");
  }
  if (options.standalone) {
    if (!options.rdzv_endpoint.empty()) {
      usage_error(
          fmt::format("--standalone runs one node with its own rendezvous; drop --rdzv-endpoint {} "
                      "(or --standalone for a multi-node job)",
                      options.rdzv_endpoint));
    }
    if (options.nnodes && options.nnodes->max != 1) {
      usage_error(
          fmt::format("--standalone runs one node, but --nnodes allows {}; drop one of them", options.nnodes->max));
    }
    options.nnodes.reset();  // --nnodes 1 with --standalone: the single-node agent
  }
  if (!form.nproc_given) {
    usage_error(fmt::format("missing --nproc-per-node; say how many workers to start, e.g. {}", kExample));
  }
  return std::move(options);
}

RunOptions parse_run_options(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_run_options(args);
}

bool run_help_requested(const std::vector<std::string>& args) { return RunFlags().flags.help_requested(args); }

std::filesystem::path find_program(const std::string& program) {
  namespace fs = std::filesystem;
  auto executable_file = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) {
    std::error_code ec;
    if (!fs::exists(program, ec)) {
      usage_error(fmt::format("program '{}' not found; check the path after `--`", program));
    }
    if (!executable_file(program)) {
      usage_error(
          fmt::format("program '{}' is not an executable file; check its path and permissions (chmod +x)", program));
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
  usage_error(fmt::format("program '{0}' not found in PATH; give its path (e.g. ./{0}) or fix PATH", program));
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

std::string run_usage() { return RunFlags().flags.help(); }

}  // namespace tenax::launcher
