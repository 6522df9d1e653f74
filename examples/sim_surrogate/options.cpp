#include "options.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace sim {
namespace {

constexpr int kExitUsage = 2;

constexpr const char* kUsage = R"(usage: sim_surrogate [options]
A 2-D heat-equation solver that trains an MLP surrogate of its own update online through Tenax's
C API, checkpoints fields + surrogate every M steps and resumes where it stopped. Run it again
with the same --output-dir and it resumes from the newest checkpoint.

  tenax run --nproc-per-node 2 -- sim_surrogate --config surrogate.toml --output-dir runs/sim
  mpirun -np 2 sim_surrogate --config surrogate.toml --output-dir runs/sim

solver:
  --nx N --ny N          cells per row / rows in all (ny a multiple of the ranks)   [128 128]
  --steps N              solver steps                                               [2000]
  --courant X            alpha dt / h^2, at most 0.25                               [0.2]
  --halo auto|mpi|tenax  halo transport (auto: MPI under mpirun, else Tenax)        [auto]
surrogate and checkpoints:
  --config FILE          TOML with TrainingArguments (learning_rate, seed, ...)
  --set KEY=VALUE        override one of them (repeatable)
  --output-dir DIR       checkpoints, metrics and result.txt                        [runs/sim_surrogate]
  --result FILE          where the final field and probe predictions go             [DIR/result.txt]
  --train-every N        one optimizer step every N solver steps (0: no surrogate)  [10]
  --save-every M         a checkpoint every M solver steps, and at the end          [200]
  --batch N              training cells per rank per optimizer step                 [64]
  --hidden N             width of the two hidden layers of the MLP                  [32]
  --sample-seed N        which cells are sampled                                    [1234]
  --probes N             probe stencils written to the result                       [16]
  --sync-save            wait for each checkpoint to commit (the bench's baseline)
  --ignore-recovery      do not handle TENAX_RECOVERED (as a program written before it):
                         under `tenax run --recovery in-process` a lost rank then
                         restarts every rank from the checkpoint
  --log-every N          a progress line every N solver steps                       [200]
faults (first generation only; see fault_hooks.h):
  --fail-at-step S --fail-rank R      rank R SIGKILLs itself after step S
  --stop-at-step S --stop-rank R      rank R SIGSTOPs itself after step S (a test kills it)
  --preempt-at-step S [--preempt-signal USR1|TERM]   rank 0 signals its agent after step S
)";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "sim_surrogate: " << message << "\n(sim_surrogate --help lists the options)\n";
  std::exit(kExitUsage);
}

std::int64_t as_int(const std::string& flag, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE) usage_error(flag + " '" + value + "' is not an integer");
  return v;
}

double as_double(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0') usage_error(flag + " '" + value + "' is not a number");
  return v;
}

}  // namespace

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (flag == "--sync-save") {
      o.sync_save = true;
      continue;
    }
    if (flag == "--ignore-recovery") {
      o.ignore_recovery = true;
      continue;
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--config")
      o.config = value;
    else if (flag == "--set") {
      if (value.find('=') == std::string::npos) usage_error("--set '" + value + "' is not KEY=VALUE");
      o.overrides.push_back(value);
    } else if (flag == "--output-dir")
      o.output_dir = value;
    else if (flag == "--result")
      o.result = value;
    else if (flag == "--nx")
      o.heat.nx = as_int(flag, value);
    else if (flag == "--ny")
      o.heat.ny = as_int(flag, value);
    else if (flag == "--courant")
      o.heat.courant = as_double(flag, value);
    else if (flag == "--steps")
      o.steps = as_int(flag, value);
    else if (flag == "--train-every")
      o.train_every = as_int(flag, value);
    else if (flag == "--save-every")
      o.save_every = as_int(flag, value);
    else if (flag == "--batch")
      o.batch = as_int(flag, value);
    else if (flag == "--hidden")
      o.hidden = as_int(flag, value);
    else if (flag == "--log-every")
      o.log_every = as_int(flag, value);
    else if (flag == "--probes")
      o.probes = as_int(flag, value);
    else if (flag == "--sample-seed")
      o.sample_seed = static_cast<std::uint64_t>(as_int(flag, value));
    else if (flag == "--halo") {
      if (value == "auto")
        o.halo = HaloTransport::kAuto;
      else if (value == "mpi")
        o.halo = HaloTransport::kMpi;
      else if (value == "tenax")
        o.halo = HaloTransport::kTenax;
      else
        usage_error("--halo '" + value + "' is not one of auto, mpi, tenax");
    } else if (flag == "--fail-at-step")
      o.faults.fail_at_step = as_int(flag, value);
    else if (flag == "--fail-rank")
      o.faults.fail_rank = static_cast<int>(as_int(flag, value));
    else if (flag == "--stop-at-step")
      o.faults.stop_at_step = as_int(flag, value);
    else if (flag == "--stop-rank")
      o.faults.stop_rank = static_cast<int>(as_int(flag, value));
    else if (flag == "--preempt-at-step")
      o.faults.preempt_at_step = as_int(flag, value);
    else if (flag == "--preempt-signal") {
      if (value == "USR1" || value == "SIGUSR1")
        o.faults.preempt_signal = SIGUSR1;
      else if (value == "TERM" || value == "SIGTERM")
        o.faults.preempt_signal = SIGTERM;
      else
        usage_error("--preempt-signal '" + value + "' is not USR1 or TERM");
    } else
      usage_error("unknown flag " + flag);
  }
  if (o.steps < 1) usage_error("--steps must be >= 1");
  if (o.train_every < 0) usage_error("--train-every must be >= 0 (0: no surrogate)");
  if (o.save_every < 1) usage_error("--save-every must be >= 1");
  if (o.batch < 1 || o.hidden < 1 || o.log_every < 1 || o.probes < 1) {
    usage_error("--batch, --hidden, --log-every and --probes must be >= 1");
  }
  if (o.output_dir.empty()) usage_error("--output-dir must not be empty");
  if (o.result.empty()) o.result = o.output_dir + "/result.txt";
  return o;
}

}  // namespace sim
