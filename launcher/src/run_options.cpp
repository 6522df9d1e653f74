#include "run_options.h"

#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <optional>
#include <sstream>

#include "tenax/core/env.h"
#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

constexpr const char* kExample = "tenax run --nproc-per-node 2 -- ./app --config run.toml";

[[noreturn]] void usage_error(const std::string& message) {
  throw ConfigError("tenax run: " + message);
}

// Parses a whole decimal integer in [min, max] for `flag`.
int parse_flag_int(const std::string& flag, const std::string& text, int min, const char* meaning,
                   const char* example) {
  std::int64_t value = 0;
  try {
    value = env::parse_int(text, flag);
  } catch (const ConfigError&) {
    usage_error(flag + " expects " + meaning + ", got '" + text + "'; for example: " + flag + " " +
                example);
  }
  if (value < min || value > std::numeric_limits<int>::max()) {
    usage_error(flag + " must be at least " + std::to_string(min) + ", got " + text);
  }
  return static_cast<int>(value);
}

bool is_known_flag(const std::string& name) {
  return name == "--nproc-per-node" || name == "--max-restarts" || name == "--run-dir" ||
         name == "--grace-period" || name == "--preempt-grace";
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
      usage_error("unknown flag " + name +
                  "; known flags: --nproc-per-node, --max-restarts, --run-dir, --grace-period, "
                  "--preempt-grace (see `tenax run --help`)");
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
      << "                         (default ./" << kDefaultRunDir << ", created if missing)\n"
      << "  --grace-period SECONDS wait between SIGTERM and SIGKILL when stopping workers\n"
      << "                         (default " << kDefaultGracePeriod.count() << ")\n"
      << "  --preempt-grace SECONDS  time workers get to save a checkpoint after the agent\n"
      << "                         forwards SIGTERM/SIGINT/SIGUSR1 to them, before SIGKILL\n"
      << "                         (default " << kDefaultPreemptGrace.count() << "; match sbatch --signal=B:USR1@N)\n"
      << "  -h, --help             show this help\n"
      << "\n"
      << "Workers get RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR,\n"
      << "MASTER_PORT, TENAX_GENERATION, TENAX_RESTART_COUNT, TENAX_RDZV_ENDPOINT and\n"
      << "TENAX_RUN_DIR, and inherit the rest of the environment.\n"
      << "\n"
      << "Exit status: 0 all workers finished; 1 failure (restart budget spent); 2 usage error;\n"
      << "3 preempted (every worker exited 0 or 3 after a forwarded signal, at least one 3);\n"
      << "130/143/138 stopped by SIGINT/SIGTERM/SIGUSR1 without a clean save.\n";
  return out.str();
}

}  // namespace tenax::launcher
