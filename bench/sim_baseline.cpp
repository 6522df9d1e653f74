// The baseline of bench/sim_overhead.py: the sim_surrogate example's solver with the surrogate
// trained by a plain libtorch loop — the same heat solver (examples/sim_surrogate/heat_solver.h),
// the same cells sampled at the same steps, the same MLP (5 -> hidden -> hidden -> 1, tanh),
// the same float64 -> float32 conversion, MSE, clipping at max_grad_norm, AdamW with the same
// hyper-parameters and a cosine schedule with warmup — but no Tenax: no C API, no collectives,
// no preemption poll, no checkpoints. One process (world size 1).
//
//   sim_baseline --nx 256 --ny 256 --steps 2000 --train-every 10 --batch 64 [--hidden 32]
//
// Prints the same closing line as sim_surrogate ("[sim] timing: steps=... loop_s=...
// per_step_us=..."), timed over the same region: the solver loop, from the first solver step to
// the last (start-up, the final gather and the result are outside).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "heat_solver.h"

namespace {

struct Options {
  sim::HeatOptions heat;
  std::int64_t steps = 2000;
  std::int64_t train_every = 10;
  std::int64_t batch = 64;
  std::int64_t hidden = 32;
  std::uint64_t sample_seed = 1234;
  // examples/sim_surrogate/surrogate.toml's values (the coupled run reads them from there).
  double learning_rate = 3e-3;
  std::int64_t warmup_steps = 5;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;
  std::uint64_t seed = 42;
};

[[noreturn]] void usage(const std::string& message) {
  std::fprintf(stderr,
               "sim_baseline: %s\nusage: sim_baseline [--nx N] [--ny N] [--steps N] [--train-every N] "
               "[--batch N] [--hidden N] [--learning-rate X] [--warmup-steps N]\n",
               message.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    char* end = nullptr;
    const double number = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0') usage(flag + " '" + value + "' is not a number");
    const auto integer = static_cast<std::int64_t>(number);
    if (flag == "--nx")
      o.heat.nx = integer;
    else if (flag == "--ny")
      o.heat.ny = integer;
    else if (flag == "--steps")
      o.steps = integer;
    else if (flag == "--train-every")
      o.train_every = integer;
    else if (flag == "--batch")
      o.batch = integer;
    else if (flag == "--hidden")
      o.hidden = integer;
    else if (flag == "--learning-rate")
      o.learning_rate = number;
    else if (flag == "--warmup-steps")
      o.warmup_steps = integer;
    else
      usage("unknown flag " + flag);
  }
  if (o.steps < 1 || o.train_every < 1 || o.batch < 1 || o.hidden < 1) usage("all sizes must be >= 1");
  return o;
}

// transformers' get_cosine_schedule_with_warmup (num_cycles 0.5), as the coupled run's schedule.
double cosine_lr(const Options& o, std::int64_t step, std::int64_t total) {
  if (step < o.warmup_steps)
    return o.learning_rate * static_cast<double>(step) / static_cast<double>(std::max<std::int64_t>(1, o.warmup_steps));
  const double progress = static_cast<double>(step - o.warmup_steps) /
                          static_cast<double>(std::max<std::int64_t>(1, total - o.warmup_steps));
  return o.learning_rate * std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  torch::manual_seed(o.seed);
  torch::nn::Sequential model(torch::nn::Linear(sim::kStencil, o.hidden), torch::nn::Tanh(),
                              torch::nn::Linear(o.hidden, o.hidden), torch::nn::Tanh(), torch::nn::Linear(o.hidden, 1));
  torch::optim::AdamW optimizer(model->parameters(),
                                torch::optim::AdamWOptions(o.learning_rate).weight_decay(o.weight_decay));
  sim::HeatStrip strip(o.heat, 0, 1);
  const std::int64_t total = std::max<std::int64_t>(1, o.steps / o.train_every);
  std::vector<double> inputs(static_cast<std::size_t>(o.batch * sim::kStencil));
  std::vector<double> labels(static_cast<std::size_t>(o.batch));
  std::int64_t optimizer_step = 0;
  double loss_value = 0.0;

  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t n = 1; n <= o.steps; ++n) {
    // World size 1: both ghost rows are walls, there is no halo to exchange.
    const bool train = n % o.train_every == 0;
    std::vector<sim::Cell> cells;
    if (train) {
      cells = strip.sample_cells(o.sample_seed, n, o.batch);
      strip.stencils(cells, inputs.data());
    }
    strip.step();
    if (train) {
      strip.values(cells, labels.data());
      const torch::Tensor x =
          torch::from_blob(inputs.data(), {o.batch, sim::kStencil}, torch::kFloat64).to(torch::kFloat32);
      const torch::Tensor y = torch::from_blob(labels.data(), {o.batch, 1}, torch::kFloat64).to(torch::kFloat32);
      model->train();
      optimizer.zero_grad();
      const torch::Tensor loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      torch::nn::utils::clip_grad_norm_(model->parameters(), o.max_grad_norm);
      for (auto& group : optimizer.param_groups()) group.options().set_lr(cosine_lr(o, optimizer_step, total));
      optimizer.step();
      ++optimizer_step;
      loss_value = loss.item<double>();  // the coupled run hands the loss back every step too
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[sim] baseline done: %lld solver steps, %lld optimizer steps, last loss %.3e\n",
              static_cast<long long>(o.steps), static_cast<long long>(optimizer_step), loss_value);
  std::printf("[sim] timing: steps=%lld loop_s=%.6f per_step_us=%.3f train_steps=%lld saves=0 save_s=0 per_save_ms=0\n",
              static_cast<long long>(o.steps), seconds, 1e6 * seconds / static_cast<double>(o.steps),
              static_cast<long long>(optimizer_step));
  return 0;
}
