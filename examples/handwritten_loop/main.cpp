// A training loop written by hand, without tenax::sdk::Trainer: for a simulation code that
// keeps control of its own time stepping and wants Tenax's pieces one by one — the
// WorkerContext from the launcher's environment, GradSync for the gradient averaging, AdamW with
// transformers' weight-decay groups, an LrSchedule, the Checkpointer, and Tenax's loggers.
//
//   tenax run --nproc-per-node 2 -- ./handwritten_loop --output-dir runs/loop --max-steps 40
//       (one command line; run it again and it resumes from the newest checkpoint)
//
// The data is synthetic and a pure function of (seed, step, rank), so a resumed run sees what
// an uninterrupted one would have seen; the model has no dropout, so the parameters and the
// optimizer state are all the state there is.
// --fail-at-step S --fail-rank R: rank R SIGKILLs itself after step S in the first generation
// only (TENAX_RESTART_COUNT=0), once the last checkpoint before S is committed, so that the
// restarted job resumes from a known step.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/grad_sync.h"
#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/optimizer_groups.h"
#include "tenax/sdk/state_capture.h"

namespace {

using tenax::sdk::NamedTensors;

constexpr std::int64_t kFeatures = 8;

/// Linear -> GELU -> LayerNorm -> Linear: the LayerNorm and the biases get no weight decay.
class Surrogate : public torch::nn::Module {
 public:
  Surrogate()
      : fc1_(register_module("fc1", torch::nn::Linear(kFeatures, 32))),
        norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({32})))),
        out_(register_module("out", torch::nn::Linear(32, 1))) {}
  torch::Tensor forward(const torch::Tensor& x) { return out_(norm_(torch::gelu(fc1_(x)))); }

 private:
  torch::nn::Linear fc1_;
  torch::nn::LayerNorm norm_;
  torch::nn::Linear out_;
};

/// This rank's batch of step `step`: y = sin(x . w) with x drawn from a generator seeded by
/// (seed, step, rank) and w by seed alone.
std::pair<torch::Tensor, torch::Tensor> batch_of(std::uint64_t seed, std::int64_t step, int rank, std::int64_t batch) {
  auto w_gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const torch::Tensor w = at::randn({kFeatures, 1}, w_gen);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed + 1000003ull * static_cast<std::uint64_t>(step + 1) +
                                                      7919ull * static_cast<std::uint64_t>(rank));
  torch::Tensor x = at::randn({batch, kFeatures}, gen);
  return {x, torch::sin(x.matmul(w))};
}

struct Options {
  std::string output_dir;
  std::int64_t max_steps = 40;
  std::int64_t save_steps = 10;
  std::int64_t logging_steps = 5;
  std::int64_t warmup_steps = 4;
  std::int64_t batch = 16;
  double learning_rate = 3e-3;
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;
  std::uint64_t seed = 42;
  std::int64_t fail_at_step = -1;
  int fail_rank = 0;
};

constexpr const char* kUsage =
    "usage: handwritten_loop --output-dir DIR [--max-steps N] [--save-steps N] [--logging-steps N]\n"
    "       [--batch N] [--learning-rate X] [--seed N] [--fail-at-step S --fail-rank R]\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::cerr << "handwritten_loop: " << message << "\n" << kUsage;
  std::exit(tenax::kExitUsage);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::cout << kUsage;
      std::exit(0);
    }
    if (i + 1 >= argc) usage_error(flag + " needs a value");
    const std::string value = argv[++i];
    auto as_int = [&] { return tenax::env::parse_int(value, flag); };
    if (flag == "--output-dir")
      o.output_dir = value;
    else if (flag == "--max-steps")
      o.max_steps = as_int();
    else if (flag == "--save-steps")
      o.save_steps = as_int();
    else if (flag == "--logging-steps")
      o.logging_steps = as_int();
    else if (flag == "--batch")
      o.batch = as_int();
    else if (flag == "--learning-rate") {
      char* end = nullptr;
      o.learning_rate = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') usage_error(flag + " '" + value + "' is not a number");
    } else if (flag == "--seed")
      o.seed = static_cast<std::uint64_t>(as_int());
    else if (flag == "--fail-at-step")
      o.fail_at_step = as_int();
    else if (flag == "--fail-rank")
      o.fail_rank = static_cast<int>(as_int());
    else
      usage_error("unknown flag " + flag);
  }
  if (o.output_dir.empty()) usage_error("--output-dir is required");
  if (o.max_steps <= 0 || o.save_steps <= 0 || o.logging_steps <= 0 || o.batch <= 0) {
    usage_error("--max-steps, --save-steps, --logging-steps and --batch must be >= 1");
  }
  return o;
}

NamedTensors named_parameters(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& item : model.named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

/// Reads the newest committed checkpoint into the model (in place) and the optimizer; returns
/// its step, or 0 when there is none.
std::int64_t resume(const tenax::sdk::Checkpointer& checkpointer, const NamedTensors& params,
                    torch::optim::AdamW& optimizer) {
  std::map<std::string, torch::Tensor> by_name;
  for (const auto& [name, p] : params) by_name.emplace("model/" + name, p.detach());
  auto loaded = checkpointer.load_latest(
      [](const std::string& name) { return name.rfind("model/", 0) == 0 || name.rfind("optim/", 0) == 0; },
      [&](const std::string& name) {
        const auto it = by_name.find(name);
        return it == by_name.end() ? torch::Tensor() : it->second;
      });
  if (!loaded) return 0;
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    const torch::Tensor saved = loaded->get("model/" + name);
    if (!saved.defined() || !saved.sizes().equals(p.sizes())) {
      throw tenax::StorageError(loaded->dir.string() + ": parameter '" + name + "' is missing or has another shape");
    }
    if (saved.data_ptr() != p.data_ptr()) p.detach().copy_(saved);  // else it was read in place
  }
  tenax::sdk::restore_optimizer_state(optimizer, params, [&](const std::string& n) { return loaded->get(n); });
  tenax::logger("handwritten_loop", tenax::LogPolicy::kRankZeroOnly)
      ->info("resumed from {} at step {}", loaded->dir.string(), loaded->step);
  return loaded->step;
}

/// Logs a finished save; a failed one stops the run (this loop has no other policy).
void report(const tenax::sdk::SaveResult& result) {
  if (!result.committed)
    throw tenax::StorageError("checkpoint of step " + std::to_string(result.step) + " failed: " + result.error);
  tenax::logger("handwritten_loop", tenax::LogPolicy::kRankZeroOnly)
      ->info("saved checkpoint {} (step stalled {:.3f} s)", result.dir.string(), result.snapshot_seconds);
}

int run(const Options& o) {
  // One intra-op thread: ranks share the cores, and fixed threads keep runs bit-identical.
  torch::set_num_threads(1);
  auto context = tenax::elastic::WorkerContext::from_env();
  tenax::set_log_identity({context.rank(), static_cast<int>(context.generation()), "worker"});
  auto log = tenax::logger("handwritten_loop", tenax::LogPolicy::kRankZeroOnly);
  if (o.fail_at_step >= 0 && (o.fail_rank < 0 || o.fail_rank >= context.world_size())) {
    throw tenax::ConfigError("--fail-rank " + std::to_string(o.fail_rank) + " is not a rank of this world (size " +
                             std::to_string(context.world_size()) + ")");
  }

  torch::manual_seed(o.seed);
  auto model = std::make_shared<Surrogate>();
  const NamedTensors params = named_parameters(*model);
  torch::optim::AdamWOptions adamw(o.learning_rate);
  adamw.weight_decay(o.weight_decay);
  torch::optim::AdamW optimizer(tenax::sdk::decay_param_groups(*model, adamw), adamw);
  const tenax::sdk::LrSchedule schedule(
      tenax::sdk::LrScheduleOptions(tenax::sdk::LrSchedulerType::kCosine, o.warmup_steps, o.max_steps)
          .base_lr(o.learning_rate));

  tenax::sdk::GradSync sync(context.communicator(), model->parameters());
  sync.broadcast_parameters(0);
  tenax::sdk::Checkpointer checkpointer(o.output_dir, context);
  std::int64_t step = resume(checkpointer, params, optimizer);
  if (step == 0) log->info("no committed checkpoint under {}; starting from scratch", o.output_dir);
  log->info("training steps {}..{} on {} ranks x batch {}", step, o.max_steps, context.world_size(), o.batch);

  double window_loss = 0.0;
  std::int64_t window_steps = 0;
  while (step < o.max_steps) {
    const auto [x, y] = batch_of(o.seed, step, context.rank(), o.batch);
    sync.zero_grad();  // not optimizer.zero_grad(): the gradients are views into GradSync's buckets
    const torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    sync.synchronize();
    torch::nn::utils::clip_grad_norm_(model->parameters(), o.max_grad_norm);
    const double lr = schedule.lr(step);
    for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
    optimizer.step();
    ++step;

    window_loss += loss.item<double>();
    ++window_steps;
    if (step % o.logging_steps == 0 || step == o.max_steps) {
      double sums[2] = {window_loss, static_cast<double>(window_steps)};
      context.communicator().allreduce(sums, 2, tenax::elastic::ElementType::kFloat64, tenax::elastic::ReduceOp::kSum);
      log->info("step {}/{} | loss {:.6f} | lr {:.3e}", step, o.max_steps, sums[0] / sums[1], lr);
      window_loss = 0.0;
      window_steps = 0;
    }
    if (step % o.save_steps == 0 || step == o.max_steps) {
      // Collective. The replicated tensors are copied before save_async returns, so views of
      // the live parameters and optimizer state are fine; the write overlaps the next steps.
      tenax::sdk::SaveRequest request;
      request.step = step;
      for (const auto& [name, p] : params) request.replicated.emplace_back("model/" + name, p.detach());
      for (auto& entry : tenax::sdk::capture_optimizer_state(optimizer, params, tenax::sdk::Capture::kView)) {
        request.replicated.push_back(std::move(entry));
      }
      request.trainer_state = {{"global_step", step}, {"max_steps", o.max_steps}};
      if (auto previous = checkpointer.save_async(std::move(request))) report(*previous);
    }
    if (step == o.fail_at_step && context.rank() == o.fail_rank && context.restart_count() == 0) {
      if (auto done = checkpointer.wait()) report(*done);  // the restart must find this one
      log->warn("failure injection: rank {} kills itself with SIGKILL after step {}", context.rank(), step);
      std::raise(SIGKILL);
    }
  }
  if (auto last = checkpointer.wait()) report(*last);  // the last save is committed before we exit
  log->info("training finished at step {}", step);
  context.finalize();
  return tenax::kExitDone;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const tenax::ConfigError& e) {
    std::cerr << "handwritten_loop: configuration error: " << e.what() << "\n";
    return tenax::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "handwritten_loop: " << e.what() << "\n";
    return tenax::kExitFailure;
  }
}
