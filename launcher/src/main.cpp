// The `tenax` command line: dispatches subcommands. Exit codes follow DESIGN.md §3:
// 0 done, 1 failure, 2 usage or configuration error, 3 preempted.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "agent.h"
#include "blas_choice.h"
#include "multi_node_plan.h"
#include "slurm_job.h"
#include "ckpt_command.h"
#include "crash_report.h"
#include "rdzv_command.h"
#include "run_options.h"
#include "tenax/core/build_info.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/kv_service.h"
#include "train_command.h"

namespace {

std::string this_hostname() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "";
  return buffer;
}

// Before any worker exists: OPENBLAS_CORETYPE, when OpenBLAS would fall back to kernels older
// than this CPU, goes into the environment every worker inherits (blas_choice.h).
void choose_blas_for_workers(spdlog::logger& log) {
  const tenax::launcher::BlasChoice choice = tenax::launcher::choose_worker_blas_here();
  if (choice.coretype) ::setenv("OPENBLAS_CORETYPE", choice.coretype->c_str(), 1);
  if (choice.warn) {
    log.warn("{}", choice.message);
  } else {
    log.info("{}", choice.message);
  }
}

int run_command(const std::vector<std::string>& args) {
  using namespace tenax;
  if (launcher::run_help_requested(args)) {
    std::cout << launcher::run_usage();
    return kExitDone;
  }
  try {
    launcher::RunOptions options = launcher::parse_run_options(args);
    launcher::find_program(options.command.front());

    LogIdentity identity;
    identity.rank = -1;
    identity.generation = 0;
    identity.role = "agent";
    set_log_identity(identity);
    auto log = logger("tenax.launcher");
    log->info("{}", version_line());
    choose_blas_for_workers(*log);

    // Multi-node when --nnodes/--rdzv-endpoint is given or srun started this agent.
    std::optional<launcher::MultiNodePlan> plan = launcher::plan_multi_node(
        options, launcher::slurm_job_from_env(launcher::process_env), this_hostname(), static_cast<int>(::getpid()));
    if (plan) return launcher::Agent(std::move(options), std::move(*plan)).run();

    // Loopback only, and still CURVE: other users of a shared login or compute node can reach
    // 127.0.0.1 too.
    elastic::KvService service(elastic::create_or_read_job_keys(launcher::job_keys_path(options)));
    const std::string endpoint = service.start("tcp://127.0.0.1:0");
    log->debug("rendezvous service listening on {}", endpoint);  // the service says it too
    const int code = launcher::Agent(std::move(options), service).run();
    service.stop();
    return code;
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\nRun `tenax run --help` for usage.\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    logger("tenax.launcher")->error("{}", e.what());
    return kExitFailure;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tenax;
  launcher::install_crash_report("tenax");
  const std::vector<std::string> args(argv + 1, argv + argc);
  // CLI11 reads the command; the command reads the rest (run_options.h, rdzv_command.h, ckpt_command.h).
  CLI::App app("", "tenax");
  app.set_help_flag("-h,--help", "show this help");
  // The description through ->description(): as C++20 (the CUDA flavour's libtorch needs it), a
  // string literal second argument also matches CLI11 2.1's counting add_flag(name, T&) overload.
  CLI::Option* version_flag =
      app.add_flag("--version")
          ->description("name the build (its commit, flavour and libtorch) and the BLAS kernels of workers");
  CLI::App* run = app.add_subcommand("run",
                                     "start and supervise the workers of a training job on this node\n"
                                     "(tenax run --nproc-per-node N [--nnodes MIN:MAX ...] -- PROGRAM ARGS...)");
  CLI::App* rdzv = app.add_subcommand("rdzv", "serve a job's rendezvous on its own (tenax rdzv --nnodes MIN:MAX ...)");
  CLI::App* ckpt = app.add_subcommand("ckpt",
                                      "list, verify, inspect, export and compare checkpoints\n"
                                      "(tenax ckpt ls|verify|inspect|export|diff ...)");
  CLI::App* train = app.add_subcommand("train",
                                       "fine-tune a Hugging Face model from a TOML job file, no C++\n"
                                       "(tenax run --nproc-per-node N -- tenax train JOB.toml [KEY=VALUE ...])");
  for (CLI::App* command : {run, train, rdzv, ckpt}) command->group("Commands");
  CLI::App* help = app.add_subcommand("help")->group("");  // the words, beside --help and --version
  CLI::App* version = app.add_subcommand("version")->group("");
  app.footer(
      "Run `tenax <command> --help` for the options of a command; `tenax --version` names the build\n"
      "(its commit, flavour and libtorch).");

  if (args.empty()) {
    std::cerr << "tenax: missing command\n\n" << app.help();
    return kExitUsage;
  }
  try {
    app.parse(std::vector<std::string>{args.front()});
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return kExitDone;
  } catch (const CLI::ParseError&) {
    std::cerr << fmt::format("tenax: unknown command '{}'; see `tenax --help`\n", args.front());
    return kExitUsage;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (help->parsed()) {
    std::cout << app.get_formatter()->make_help(&app, "tenax", CLI::AppFormatMode::Normal);  // not `help`'s own
    return kExitDone;
  }
  if (*version_flag || version->parsed()) {
    // The second line: the BLAS kernels `tenax run` would give its workers here (bench headers
    // record it).
    std::cout << fmt::format("{}\n{}\n", version_line(), launcher::choose_worker_blas_here().message);
    return kExitDone;
  }
  if (run->parsed()) return run_command(rest);
  if (train->parsed()) return launcher::exec_train_command(rest);
  if (rdzv->parsed()) return launcher::run_rdzv_command(rest);
  return launcher::run_ckpt_command(argc - 1, argv + 1);  // `ckpt`, the one left; argv[1] is "ckpt"
}
