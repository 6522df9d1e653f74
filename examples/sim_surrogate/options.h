// The command line of sim_surrogate: the solver's options as plain flags; the surrogate's
// training arguments (TrainingArguments' names) come from a TOML file (--config) plus
// `--set key=value` overrides, handed unchanged to tenax_trainer_create.
// Thread-safety: a plain value, parsed once at start-up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fault_hooks.h"
#include "heat_solver.h"

namespace sim {

enum class HaloTransport { kAuto, kMpi, kTenax };

struct Options {
  std::string config;                             ///< TOML of TrainingArguments ("" : defaults)
  std::vector<std::string> overrides;             ///< "key=value", after the file
  std::string output_dir = "runs/sim_surrogate";  ///< checkpoints, metrics, result.txt
  std::string result;                             ///< "" : <output_dir>/result.txt
  HeatOptions heat;
  std::int64_t steps = 2000;         ///< solver steps
  std::int64_t train_every = 10;     ///< one surrogate optimizer step every N solver steps (0: off)
  std::int64_t save_every = 200;     ///< a checkpoint every M solver steps (and at the end)
  std::int64_t batch = 64;           ///< training cells per rank and optimizer step
  std::int64_t hidden = 32;          ///< width of the MLP's two hidden layers
  std::int64_t log_every = 200;      ///< a progress line every this many solver steps
  std::int64_t probes = 16;          ///< probe stencils in the result file
  std::uint64_t sample_seed = 1234;  ///< which cells are sampled for training
  bool sync_save = false;            ///< wait for every checkpoint to commit (the bench's baseline)
  /// Do not call tenax_enable_in_process_recovery: behave as a program written before it (a lost
  /// peer under `--recovery in-process` then restarts every worker from the checkpoint).
  bool ignore_recovery = false;
  HaloTransport halo = HaloTransport::kAuto;
  FaultOptions faults;
};

/// Parses argv; prints usage and exits 0 on --help, exits 2 (usage) naming the flag on a bad one.
Options parse_options(int argc, char** argv);

}  // namespace sim
