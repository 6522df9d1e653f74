// The foundation example: a small MLP with dropout, trained data-parallel on a synthetic
// regression task through tenax::sdk::Trainer, with optional failure injection.
//
//   tenax run --nproc-per-node 2 -- ./synthetic_regression --output-dir runs/demo
//       --max-steps 60 --save-steps 20 --fail-at-step 30 --fail-rank 1   (one command line)
//
// --fail-at-step S --fail-rank R: rank R SIGKILLs itself right after step S, in the first
// generation only (TENAX_RESTART_COUNT=0), so the restarted job runs through. With
// --fail-signal STOP it SIGSTOPs itself instead: a hung worker for `tenax run --hang-timeout`.
// --fail-on-heal yes: under `tenax run --recovery in-process`, the first replacement of a lost
// rank SIGKILLs itself while it heals (a second failure while the new generation forms).
// --hang-at-step S --hang-rank R [--hang-mode spin|sleep]: rank R hangs after step S, in the first
// generation only, without a signal: its training thread spins in a busy loop or sleeps in a
// system call for ever, while the process (and its other threads) lives on; the peers block in
// the next step's allreduce. For `tenax run --hang-timeout`, which must tell it from them.
// --stop-at-exit-rank R: rank R SIGSTOPs itself once training has ended (the final checkpoint
// committed, the progress file closed), in generation 0 only: a worker stuck on its way
// out, which `tenax run --hang-timeout` must still find.
// --sample-log PATH: each process appends to PATH.<pid>, at the start of every optimizer step,
// "<generation> <step> <world size> <rank> <sample index>...": the samples of its slice of that
// step's global batch, so that a test can check every sample is seen once per epoch however the
// world changed (the newest generation's lines for a step are the ones that counted).
// --eval-steps N: evaluates on a held-out set every N steps (eval_loss); --early-stopping-patience
// P [--early-stopping-threshold X]: EarlyStoppingCallback on eval_loss, whose counter a heal or a
// resume must carry (with a threshold above any gain, every evaluation after the first counts).
// --step-lines yes: rank 0 prints "step N/M" after every optimizer step, for the recovery bench's
// clock. Not --logging-steps 1: a log step costs an allreduce of the loss and an entry in
// log_history, which every checkpoint manifest and every peer heal carries whole, so over a
// 5-minute run at 200 steps/s the history, not the fault tolerance, would set the pace.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <unistd.h>
#include <vector>

#include <torch/torch.h>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/core/exit_codes.h"
#include "tenax/sdk/callbacks/early_stopping.h"
#include "tenax/sdk/trainer.h"
#include "tenax/sdk/callbacks/fault_drills.h"

namespace {

using tenax::sdk::Batch;
using tenax::sdk::Example;
using tenax::sdk::ModelOutput;

/// y = sin(x . w) + noise, generated from a private generator: the data never touches the
/// global RNG, so it is identical on every rank and in every generation.
class SyntheticRegression final : public tenax::sdk::Dataset {
 public:
  SyntheticRegression(std::int64_t size, std::int64_t features, std::uint64_t seed) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    inputs_ = at::randn({size, features}, gen);
    auto w = at::randn({features, 1}, gen);
    targets_ = at::sin(inputs_.matmul(w)) + 0.05 * at::randn({size, 1}, gen);
  }
  std::int64_t size() const override { return inputs_.size(0); }
  Example get(std::int64_t i) const override {
    if (record_) {
      const std::lock_guard<std::mutex> lock(mutex_);
      loaded_.push_back(i);
    }
    return {inputs_[i], targets_[i]};
  }
  /// --sample-log: remember every index loaded.
  void record() { record_ = true; }
  /// The last `n` indices loaded (a step redone after a loss loaded its samples again).
  std::vector<std::int64_t> last_loaded(std::int64_t n) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto count = std::min<std::size_t>(loaded_.size(), static_cast<std::size_t>(n));
    std::vector<std::int64_t> out(loaded_.end() - static_cast<std::ptrdiff_t>(count), loaded_.end());
    loaded_.clear();
    return out;
  }

 private:
  torch::Tensor inputs_, targets_;
  bool record_ = false;
  mutable std::mutex mutex_;
  mutable std::vector<std::int64_t> loaded_;
};

/// --sample-log: one line per optimizer step, written before the step runs (see the top).
class SampleLog final : public tenax::sdk::TrainerCallback {
 public:
  SampleLog(const std::string& path, std::shared_ptr<const SyntheticRegression> data)
      : out_(path + "." + std::to_string(::getpid()), std::ios::app), data_(std::move(data)) {
    if (!out_) throw tenax::ConfigError("--sample-log: cannot open " + path + "." + std::to_string(::getpid()));
  }
  void on_step_begin(const tenax::sdk::TrainingArguments&, tenax::sdk::TrainerState& state,
                     tenax::sdk::TrainerControl&) override {
    out_ << state.generation << ' ' << state.global_step << ' ' << state.world_size << ' ' << state.rank;
    for (std::int64_t i : data_->last_loaded(state.train_batch_size / state.world_size)) out_ << ' ' << i;
    out_ << std::endl;  // flushed: the process may be killed at any moment
  }

 private:
  std::ofstream out_;
  std::shared_ptr<const SyntheticRegression> data_;
};

/// --step-lines: rank 0's "step N/M" after each optimizer step, flushed (the bench's clock).
class StepLines final : public tenax::sdk::TrainerCallback {
 public:
  void on_step_end(const tenax::sdk::TrainingArguments& args, tenax::sdk::TrainerState& state,
                   tenax::sdk::TrainerControl&) override {
    if (state.rank == 0) std::cout << "step " << state.global_step << '/' << args.max_steps << " done" << std::endl;
  }
};

/// --hang-at-step: rank `rank`'s training thread stops after step `step` and never comes back
/// (the agent kills the process). Thread-safety: the training thread, as every callback.
class HangInjection final : public tenax::sdk::TrainerCallback {
 public:
  enum class Mode { kSpin, kSleep };
  HangInjection(std::int64_t step, int rank, Mode mode, std::int64_t restart_count)
      : step_(step), rank_(rank), mode_(mode), armed_(restart_count == 0) {}
  void on_step_end(const tenax::sdk::TrainingArguments&, tenax::sdk::TrainerState& state,
                   tenax::sdk::TrainerControl&) override {
    if (!armed_ || state.global_step != step_ || state.rank != rank_) return;
    tenax::logger("example")->warn("hang injection: rank {} {} after step {} (pid {})", rank_,
                                   mode_ == Mode::kSpin ? "spins in a busy loop" : "sleeps in a system call", step_,
                                   ::getpid());
    // volatile: a loop without side effects may be assumed to end and be removed.
    for (volatile std::uint64_t spins = 0;; spins = spins + 1) {
      if (mode_ == Mode::kSleep) ::pause();
    }
  }

 private:
  std::int64_t step_;
  int rank_;
  Mode mode_;
  bool armed_;
};

/// MLP with dropout, so that restoring the RNG state matters for bit-exact resume.
class Regressor final : public tenax::sdk::Model {
 public:
  explicit Regressor(std::int64_t features)
      : fc1_(register_module("fc1", torch::nn::Linear(features, 64))),
        fc2_(register_module("fc2", torch::nn::Linear(64, 64))),
        out_(register_module("out", torch::nn::Linear(64, 1))),
        dropout_(register_module("dropout", torch::nn::Dropout(0.1))) {}

  ModelOutput forward(const Batch& batch) override {
    auto h = dropout_(torch::gelu(fc1_(batch.inputs)));
    h = dropout_(torch::gelu(fc2_(h)));
    ModelOutput out;
    out.logits = out_(h);
    if (batch.labels.defined()) out.loss = torch::mse_loss(out.logits, batch.labels);
    return out;
  }

 private:
  torch::nn::Linear fc1_, fc2_, out_;
  torch::nn::Dropout dropout_;
};

struct Options {
  tenax::sdk::TrainingArguments args;
  std::int64_t fail_at_step = -1;
  int fail_rank = 0;
  int fail_signal = SIGKILL;
  bool fail_on_heal = false;
  std::int64_t hang_at_step = -1;
  int hang_rank = 0;
  HangInjection::Mode hang_mode = HangInjection::Mode::kSpin;
  int stop_at_exit_rank = -1;
  std::int64_t preempt_at_step = -1;
  int preempt_signal = SIGUSR1;
  std::int64_t dataset_size = 4096;
  std::int64_t features = 16;
  std::string sample_log;
  bool step_lines = false;
  std::int64_t early_stopping_patience = 0;  ///< 0: no early stopping
  double early_stopping_threshold = 0.0;
};

constexpr const char* kUsage =
    "usage: synthetic_regression --output-dir DIR [--max-steps N] [--save-steps N]\n"
    "       [--logging-steps N] [--per-device-batch N] [--learning-rate X] [--seed N]\n"
    "       [--optim adamw_torch|adamw_torch_fused|sgd|adafactor]\n"
    "       [--dataset-size N] [--fail-at-step S --fail-rank R [--fail-signal KILL|STOP]]\n"
    "       [--preempt-at-step S [--preempt-signal USR1|TERM]] [--fail-on-heal yes]\n"
    "       [--hang-at-step S --hang-rank R [--hang-mode spin|sleep]] [--stop-at-exit-rank R]\n"
    "       [--handle-preemption yes|no] [--sample-log PATH] [--step-lines yes|no]\n"
    "       [--eval-steps N [--early-stopping-patience P [--early-stopping-threshold X]]]\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "synthetic_regression: " << message << "\n" << kUsage;
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  o.args.max_steps = 60;
  o.args.save_steps = 20;
  o.args.logging_steps = 10;
  o.args.per_device_train_batch_size = 16;
  o.args.learning_rate = 3e-3;
  o.args.weight_decay = 0.01;
  o.args.warmup_steps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string value = argv[++i];
    auto as_int = [&] { return tenax::env::parse_int(value, flag); };
    auto as_yes_no = [&] {
      if (value != "yes" && value != "no") usage_error(flag + " must be yes or no, got " + value);
      return value == "yes";
    };
    auto as_double = [&] {
      char* end = nullptr;
      const double x = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') usage_error(flag + " '" + value + "' is not a number");
      return x;
    };
    if (flag == "--output-dir")
      o.args.output_dir = value;
    else if (flag == "--max-steps")
      o.args.max_steps = as_int();
    else if (flag == "--save-steps")
      o.args.save_steps = as_int();
    else if (flag == "--logging-steps")
      o.args.logging_steps = as_int();
    else if (flag == "--per-device-batch")
      o.args.per_device_train_batch_size = as_int();
    else if (flag == "--learning-rate")
      o.args.learning_rate = as_double();
    else if (flag == "--seed")
      o.args.seed = static_cast<std::uint64_t>(as_int());
    else if (flag == "--optim")
      o.args.optim = value;  // validate() refuses a name outside the list, naming it
    else if (flag == "--dataset-size")
      o.dataset_size = as_int();
    else if (flag == "--eval-steps") {
      o.args.eval_strategy = "steps";
      o.args.eval_steps = as_int();
      o.args.metric_for_best_model = "eval_loss";
    } else if (flag == "--early-stopping-patience")
      o.early_stopping_patience = as_int();
    else if (flag == "--early-stopping-threshold")
      o.early_stopping_threshold = as_double();
    else if (flag == "--sample-log")
      o.sample_log = value;
    else if (flag == "--fail-at-step")
      o.fail_at_step = as_int();
    else if (flag == "--fail-rank")
      o.fail_rank = static_cast<int>(as_int());
    else if (flag == "--fail-signal") {
      if (value != "KILL" && value != "STOP") usage_error("--fail-signal must be KILL or STOP, got " + value);
      o.fail_signal = value == "KILL" ? SIGKILL : SIGSTOP;
    } else if (flag == "--fail-on-heal")
      o.fail_on_heal = as_yes_no();
    else if (flag == "--hang-at-step")
      o.hang_at_step = as_int();
    else if (flag == "--hang-rank")
      o.hang_rank = static_cast<int>(as_int());
    else if (flag == "--stop-at-exit-rank")
      o.stop_at_exit_rank = static_cast<int>(as_int());
    else if (flag == "--hang-mode") {
      if (value != "spin" && value != "sleep") usage_error("--hang-mode must be spin or sleep, got " + value);
      o.hang_mode = value == "spin" ? HangInjection::Mode::kSpin : HangInjection::Mode::kSleep;
    } else if (flag == "--step-lines")
      o.step_lines = as_yes_no();
    else if (flag == "--preempt-at-step")
      o.preempt_at_step = as_int();
    else if (flag == "--handle-preemption") {
      // no: the per-step cost of fault tolerance is measured against a run without it (bench/).
      o.args.handle_preemption_signals = as_yes_no();
    } else if (flag == "--preempt-signal") {
      if (value != "USR1" && value != "TERM") usage_error("--preempt-signal must be USR1 or TERM, got " + value);
      o.preempt_signal = value == "USR1" ? SIGUSR1 : SIGTERM;
    } else
      usage_error("unknown flag " + flag);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Options options = parse(argc, argv);
    // One intra-op thread: ranks share the machine's cores, and a fixed thread count keeps
    // the arithmetic identical between runs (bit-exact resume).
    torch::set_num_threads(1);
    torch::manual_seed(options.args.seed);  // same initial weights on every rank
    auto model = std::make_shared<Regressor>(options.features);
    auto data = std::make_shared<SyntheticRegression>(options.dataset_size, options.features, options.args.seed + 1);
    if (!options.sample_log.empty()) data->record();
    // The model and data need no peer: built before the WorkerContext, they are ready in a warm
    // spare (`tenax run --recovery in-process`) by the time it is given a lost rank's place.
    auto context = tenax::elastic::WorkerContext::from_env();
    tenax::set_log_identity({context.rank(), static_cast<int>(context.generation()), "worker"});
    if (options.fail_at_step >= 0 && (options.fail_rank < 0 || options.fail_rank >= context.world_size())) {
      throw tenax::ConfigError("--fail-rank " + std::to_string(options.fail_rank) +
                               " is not a rank of this world (size " + std::to_string(context.world_size()) + ")");
    }
    if (options.hang_at_step >= 0 && (options.hang_rank < 0 || options.hang_rank >= context.world_size())) {
      throw tenax::ConfigError("--hang-rank " + std::to_string(options.hang_rank) +
                               " is not a rank of this world (size " + std::to_string(context.world_size()) + ")");
    }

    tenax::sdk::Trainer trainer(model, options.args, data, context);
    if (options.args.eval_strategy != tenax::sdk::IntervalStrategy::kNo) {
      trainer.set_eval_dataset(std::make_shared<SyntheticRegression>(256, options.features, options.args.seed + 2));
    }
    if (options.early_stopping_patience > 0) {
      trainer.add_callback(std::make_shared<tenax::sdk::EarlyStoppingCallback>(options.early_stopping_patience,
                                                                               options.early_stopping_threshold));
    }
    if (options.fail_at_step >= 0) {
      trainer.add_callback(std::make_shared<tenax::sdk::FailureInjection>(
          options.fail_at_step, options.fail_rank, context.restart_count(), options.fail_signal));
    }
    if (options.fail_on_heal) {
      trainer.add_callback(
          std::make_shared<tenax::sdk::FailureWhileHealing>(context.identity().replacement, context.restart_count()));
    }
    if (options.hang_at_step >= 0) {
      trainer.add_callback(std::make_shared<HangInjection>(options.hang_at_step, options.hang_rank, options.hang_mode,
                                                           context.restart_count()));
    }
    if (!options.sample_log.empty()) trainer.add_callback(std::make_shared<SampleLog>(options.sample_log, data));
    if (options.step_lines) trainer.add_callback(std::make_shared<StepLines>());
    if (options.preempt_at_step >= 0) {
      trainer.add_callback(
          std::make_shared<tenax::sdk::PreemptionInjection>(options.preempt_at_step, options.preempt_signal));
    }
    const tenax::sdk::TrainOutput out = trainer.train();
    if (options.stop_at_exit_rank == context.rank() && context.generation() == 0) ::raise(SIGSTOP);
    context.finalize();
    return out.preempted ? tenax::kExitPreempted : tenax::kExitDone;
  } catch (const tenax::ConfigError& e) {
    std::cerr << "synthetic_regression: configuration error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "synthetic_regression: " << e.what() << "\n";
    return 1;
  }
}
