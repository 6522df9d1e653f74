// sim_surrogate: a simulation code that embeds Tenax through its C API (tenax.h), the way a C,
// C++ or Fortran solver would. It owns its main loop: every solver step it exchanges halos and
// advances the 2-D heat equation (heat_solver.h); every N steps it trains an MLP surrogate
// online on its own fields (predict u(t + dt) at a cell from the 5-point stencil at t, on cells
// sampled deterministically from its strip); every M steps it saves a checkpoint that holds
// the field, the time and the step with the model, the optimizer, the schedule and the RNG; and
// every step it asks whether the job is being preempted.
//
//   tenax run --nproc-per-node 2 -- sim_surrogate --config surrogate.toml --output-dir runs/sim
//                                      (a killed rank: the agent restarts both, they resume)
//   mpirun -np 2 sim_surrogate --config ... --output-dir runs/sim
//                                      (MPI halo; recovery is running the command again)
//
// At the end rank 0 writes the whole field and the surrogate's predictions on fixed probe
// stencils to <output-dir>/result.txt: a killed-and-resumed run writes the same bytes as an
// uninterrupted one. Exit status: 0 done, 3 preempted (checkpoint saved: run it again),
// 2 bad option or configuration, 1 failure (a lost peer: the launcher restarts it).
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fault_hooks.h"
#include "halo_exchange.h"
#include "heat_solver.h"
#include "mpi_launch.h"
#include "options.h"
#include "result_file.h"
#include "tenax.h"
#include "tenax_check.h"

namespace sim {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

/// Rank 0's voice: progress lines a person reading the job's log at 3 a.m. can follow.
class Progress {
 public:
  explicit Progress(int rank) : rank_(rank) {}
  template <typename... Args>
  void say(const char* fmt, Args... args) const {
    if (rank_ != 0) return;
    std::fprintf(stdout, "[sim] ");
    if constexpr (sizeof...(Args) == 0) {
      std::fputs(fmt, stdout);
    } else {
      std::fprintf(stdout, fmt, args...);
    }
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }

 private:
  int rank_;
};

tenax_array array_of(void* data, tenax_dtype dtype, std::vector<std::int64_t> shape) {
  tenax_array a{};
  a.data = data;
  a.dtype = dtype;
  a.order = TENAX_ORDER_C;
  a.ndim = static_cast<std::int32_t>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) a.shape[d] = shape[d];
  return a;
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

/// Counters for the closing timing line (what bench/sim_overhead.py reads).
struct Timing {
  double loop_seconds = 0.0;
  double save_seconds = 0.0;  // inside tenax_checkpoint_save (+ wait with --sync-save)
  std::int64_t saves = 0;
  std::int64_t steps = 0;
  std::int64_t train_steps = 0;
};

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);

  // The launch: mpirun gives us an MPI job of our own (the halo goes over it and Tenax averages
  // gradients on a duplicate of it); `tenax run` and srun give environment variables only.
  const bool use_mpi = o.halo == HaloTransport::kMpi || (o.halo == HaloTransport::kAuto && started_by_mpirun());
  if (use_mpi) mpi_init(&argc, &argv);
  tenax_context* ctx = nullptr;
  if (use_mpi) {
    const tenax_status status = tenax_init_mpi(&ctx, mpi_world_fortran_handle());
    if (status == TENAX_ERR_CONFIG) {
      std::fprintf(stderr,
                   "[sim] tenax_init_mpi: %s; Tenax's collectives go over Gloo instead (the halo stays on MPI)\n",
                   tenax_last_error());
      check(tenax_init(&ctx), "tenax_init");
    } else {
      check(status, "tenax_init_mpi");
    }
  } else {
    check(tenax_init(&ctx), "tenax_init");
  }
  std::int32_t rank = 0;
  std::int32_t world_size = 1;
  check(tenax_rank(ctx, &rank), "tenax_rank");
  check(tenax_world_size(ctx, &world_size), "tenax_world_size");
  if (use_mpi && (mpi_rank() != rank || mpi_world_size() != world_size)) {
    throw std::runtime_error("Tenax sees rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                             " but MPI_COMM_WORLD rank " + std::to_string(mpi_rank()) + " of " +
                             std::to_string(mpi_world_size()) + ": the strips would not line up");
  }
  const Progress progress(rank);

  HeatStrip strip(o.heat, rank, world_size);
  std::unique_ptr<HaloExchange> halo = use_mpi ? make_mpi_halo() : make_tenax_halo(ctx, rank, world_size);
  FaultHooks faults(o.faults, rank, world_size, o.output_dir, o.save_every);

  // The surrogate: 5 stencil values -> 2 hidden tanh layers -> u(t + dt). max_steps (the LR
  // schedule's length) is the number of optimizer steps the whole run will take.
  const std::int64_t widths[] = {kStencil, o.hidden, o.hidden, 1};
  tenax_model* model = nullptr;
  check(tenax_model_create_mlp(&model, widths, 4, "tanh", TENAX_LOSS_MSE), "tenax_model_create_mlp");
  const std::int64_t optimizer_steps = o.train_every > 0 ? std::max<std::int64_t>(1, o.steps / o.train_every) : 1;
  std::vector<std::string> overrides = {"output_dir=" + o.output_dir, "max_steps=" + std::to_string(optimizer_steps)};
  overrides.insert(overrides.end(), o.overrides.begin(), o.overrides.end());
  std::vector<const char*> override_ptrs;
  for (const auto& s : overrides) override_ptrs.push_back(s.c_str());
  tenax_trainer* trainer = nullptr;
  check(tenax_trainer_create(&trainer, ctx, model, o.config.empty() ? nullptr : o.config.c_str(), override_ptrs.data(),
                             static_cast<std::int32_t>(override_ptrs.size())),
        "tenax_trainer_create");
  check(tenax_model_free(&model), "tenax_model_free");  // the trainer holds its own reference

  // The simulation's state, saved and restored with the surrogate in one checkpoint: this
  // rank's strip (ghosts included: they are rewritten before use, and one array is simpler),
  // the time (summed step by step, so it is saved rather than recomputed) and the step.
  double time = 0.0;
  std::int64_t step = 0;
  tenax_array field = array_of(strip.data(), TENAX_FLOAT64, {strip.stored_rows(), strip.stride()});
  tenax_array time_array = array_of(&time, TENAX_FLOAT64, {1});
  tenax_array step_array = array_of(&step, TENAX_INT64, {1});
  check(tenax_register_state(trainer, "field", &field, TENAX_PER_RANK), "tenax_register_state(field)");
  check(tenax_register_state(trainer, "time", &time_array, TENAX_REPLICATED), "tenax_register_state(time)");
  check(tenax_register_state(trainer, "step", &step_array, TENAX_REPLICATED), "tenax_register_state(step)");
  // Under `tenax run --recovery in-process` a lost rank is then healed while this process lives on:
  // any collective call below may return TENAX_RECOVERED, with field, time and step put back to
  // what they were at the last completed tenax_train_step (the loop below goes on from there).
  // Everything else this loop keeps follows from those three, or is only reported.
  if (!o.ignore_recovery) check(tenax_enable_in_process_recovery(trainer), "tenax_enable_in_process_recovery");

  progress.say(
      "2-D heat equation, %lld x %lld cells on %d rank(s) (halo over %s), %lld solver steps; surrogate %s; "
      "a checkpoint every %lld steps in %s/checkpoints",
      static_cast<long long>(o.heat.nx), static_cast<long long>(o.heat.ny), world_size, halo->name(),
      static_cast<long long>(o.steps),
      o.train_every > 0 ? ("trained every " + std::to_string(o.train_every) + " steps").c_str() : "off",
      static_cast<long long>(o.save_every), o.output_dir.c_str());

  std::int64_t restored = -1;
  const tenax_status restore_status = tenax_checkpoint_restore(trainer, &restored);
  const char* restarts = std::getenv("TENAX_RESTART_COUNT");
  if (restore_status == TENAX_RECOVERED) {
    // This process replaces a lost rank: its strip, the time and the step came from live peers.
    std::fprintf(stdout,
                 "[sim] rank %d replaces a lost rank: healed from live peers (not from disk) at solver step %lld "
                 "(t = %.6g, optimizer step %lld)\n",
                 rank, static_cast<long long>(step), time, static_cast<long long>(restored));
    std::fflush(stdout);
    restored = step;
  } else {
    check(restore_status, "tenax_checkpoint_restore");
    if (restored < 0) {
      progress.say("no checkpoint in %s/checkpoints: starting at solver step 0", o.output_dir.c_str());
    } else {
      if (restored != step) {
        throw std::runtime_error("the checkpoint is labelled solver step " + std::to_string(restored) +
                                 " but holds step " + std::to_string(step) + ": it was not written by this program");
      }
      progress.say("resumed at solver step %lld (t = %.6g) from %s/checkpoints%s; %lld steps to go",
                   static_cast<long long>(step), time, o.output_dir.c_str(),
                   restarts != nullptr && std::string(restarts) != "0"
                       ? (" after restart " + std::string(restarts) + " by the agent").c_str()
                       : "",
                   static_cast<long long>(o.steps > step ? o.steps - step : 0));
    }
  }

  std::vector<double> inputs(static_cast<std::size_t>(o.batch * kStencil));
  std::vector<double> labels(static_cast<std::size_t>(o.batch));
  tenax_array input_array = array_of(inputs.data(), TENAX_FLOAT64, {o.batch, kStencil});
  tenax_array label_array = array_of(labels.data(), TENAX_FLOAT64, {o.batch, 1});
  double loss = 0.0;
  std::int64_t last_saved = restored;
  Timing timing;

  auto save = [&](std::int64_t at) {
    const auto start = Clock::now();
    check(tenax_checkpoint_save(trainer, at), "tenax_checkpoint_save");
    if (o.sync_save) check(tenax_checkpoint_wait(trainer), "tenax_checkpoint_wait");
    timing.save_seconds += seconds_since(start);
    ++timing.saves;
    last_saved = at;
  };

  const auto loop_start = Clock::now();
  auto window_start = loop_start;
  std::int64_t window_first = step;
  std::int64_t recoveries = 0;
  while (step < o.steps) {
    try {
      const std::int64_t n = step + 1;
      halo->exchange(strip);
      const bool train = o.train_every > 0 && n % o.train_every == 0;
      std::vector<Cell> cells;
      if (train) {
        cells = strip.sample_cells(o.sample_seed, n, o.batch);
        strip.stencils(cells, inputs.data());
      }
      strip.step();
      time += strip.dt();
      step = n;
      if (train) {
        strip.values(cells, labels.data());
        check(tenax_train_step(trainer, &input_array, &label_array, &loss), "tenax_train_step");
        ++timing.train_steps;
      }
      if (step % o.save_every == 0 || step == o.steps) save(step);

      std::int32_t signal = 0;
      check(tenax_preemption_requested(trainer, &signal), "tenax_preemption_requested");
      if (signal != 0) {
        if (last_saved != step) save(step);
        check(tenax_checkpoint_wait(trainer), "tenax_checkpoint_wait");
        progress.say(
            "preempted by %s at solver step %lld (t = %.6g): checkpoint committed; exiting %d so that the "
            "job is requeued (the same command resumes at step %lld)",
            signal_name(signal), static_cast<long long>(step), time, TENAX_EXIT_PREEMPTED,
            static_cast<long long>(step));
        check(tenax_trainer_free(&trainer), "tenax_trainer_free");
        check(tenax_finalize(&ctx), "tenax_finalize");
        if (use_mpi) mpi_finalize();
        return TENAX_EXIT_PREEMPTED;
      }
      faults.after_step(step);

      if (step % o.log_every == 0 || step == o.steps) {
        const double rate = static_cast<double>(step - window_first) / std::max(1e-9, seconds_since(window_start));
        std::int64_t opt_step = 0;
        check(tenax_optimizer_step(trainer, &opt_step), "tenax_optimizer_step");
        progress.say(
            "step %lld/%lld (%.0f%%)  t = %.6g  surrogate loss %.3e (rank 0, optimizer step %lld)  "
            "%.0f steps/s, ETA %.0f s",
            static_cast<long long>(step), static_cast<long long>(o.steps),
            100.0 * static_cast<double>(step) / static_cast<double>(o.steps), time, loss,
            static_cast<long long>(opt_step), rate, static_cast<double>(o.steps - step) / std::max(rate, 1e-9));
        window_start = Clock::now();
        window_first = step;
      }
    } catch (const TenaxFailure& e) {
      if (e.status() != TENAX_RECOVERED) throw;
      // A peer was lost and the job healed in process: field, time and step are those of the last
      // completed training step on every rank (a save or training step cut short is not redone
      // here: the job goes on from after it, and the next scheduled save is taken as usual).
      ++recoveries;
      progress.say(
          "a rank was lost; healed in process without restarting this process: going on from solver step %lld "
          "(t = %.6g), the field rolled back in memory (%s)",
          static_cast<long long>(step), time, e.what());
      window_start = Clock::now();
      window_first = step;
      last_saved = step;  // as in the replacement: every rank agrees on what a preemption saves
    }
  }
  timing.loop_seconds = seconds_since(loop_start);
  timing.steps = step - std::max<std::int64_t>(restored, 0);
  check(tenax_checkpoint_wait(trainer), "tenax_checkpoint_wait");  // the last save is committed before we go

  // The result: the whole field on rank 0, and the surrogate on the probe stencils.
  RunResult result;
  result.nx = o.heat.nx;
  result.ny = o.heat.ny;
  result.step = step;
  result.time = time;
  result.field = halo->gather_field(strip);
  if (rank == 0) {
    result.probes = probe_stencils(o.probes);
    for (std::int64_t p = 0; p < o.probes; ++p)
      result.exact.push_back(strip.exact_update(&result.probes[static_cast<std::size_t>(p * kStencil)]));
    if (o.train_every > 0) {
      result.predictions.resize(static_cast<std::size_t>(o.probes));
      tenax_array probe_in = array_of(result.probes.data(), TENAX_FLOAT64, {o.probes, kStencil});
      tenax_array probe_out = array_of(result.predictions.data(), TENAX_FLOAT64, {o.probes, 1});
      check(tenax_predict(trainer, &probe_in, &probe_out), "tenax_predict");
    }
    std::filesystem::create_directories(std::filesystem::path(o.result).parent_path().empty()
                                            ? std::filesystem::path(".")
                                            : std::filesystem::path(o.result).parent_path());
    const std::uint64_t digest = write_result(o.result, result);
    progress.say("done: solver step %lld, t = %.6g; field and surrogate written to %s (digest %016" PRIx64 ")",
                 static_cast<long long>(step), time, o.result.c_str(), digest);
    if (recoveries > 0) progress.say("recovered in process %lld time(s)", static_cast<long long>(recoveries));
    progress.say(
        "timing: steps=%lld loop_s=%.6f per_step_us=%.3f train_steps=%lld saves=%lld save_s=%.6f "
        "per_save_ms=%.4f",
        static_cast<long long>(timing.steps), timing.loop_seconds,
        timing.steps > 0 ? 1e6 * timing.loop_seconds / static_cast<double>(timing.steps) : 0.0,
        static_cast<long long>(timing.train_steps), static_cast<long long>(timing.saves), timing.save_seconds,
        timing.saves > 0 ? 1e3 * timing.save_seconds / static_cast<double>(timing.saves) : 0.0);
  }
  check(tenax_trainer_free(&trainer), "tenax_trainer_free");
  check(tenax_finalize(&ctx), "tenax_finalize");
  if (use_mpi) mpi_finalize();
  return 0;
}

}  // namespace
}  // namespace sim

int main(int argc, char** argv) {
  try {
    return sim::run(argc, argv);
  } catch (const sim::TenaxFailure& e) {
    std::fprintf(stderr, "sim_surrogate: %s\n", e.what());
    if (e.status() == TENAX_ERR_CONFIG || e.status() == TENAX_ERR_INVALID_ARGUMENT) return 2;
    if (e.status() == TENAX_ERR_PEER) {
      std::fprintf(stderr,
                   "sim_surrogate: a peer is gone; exiting so that the launcher (or a requeue) restarts the "
                   "job from the last checkpoint\n");
    }
    return 1;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "sim_surrogate: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sim_surrogate: %s\n", e.what());
    return 1;
  }
}
