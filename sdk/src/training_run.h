// TrainingRun: one run of a Trainer, from begin() to end() — what begin() builds (the plan, the
// optimizer, the schedule, the gradient sync, the sampler, the Checkpointer), what the steps
// count (losses, timing windows) and what in-process recovery needs (whether this rank holds
// state, the mirrored user state). A rejoin to a new generation rebuilds the generation-bound
// pieces (rejoined()); the rest lives as long as the run.
// Thread-safety: training thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/optim/optimizer.h>

#include "resume_choice.h"
#include "run_plan.h"
#include "user_state_mirror.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/grad_sync.h"
#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/preemption.h"
#include "tenax/sdk/sampler.h"
#include "tenax/sdk/trainer.h"

namespace tenax::sdk::detail {

class TrainingRun {
 public:
  using Clock = std::chrono::steady_clock;

  /// The Checkpointer of this generation under `output_dir`; the rest is set by Trainer::begin().
  TrainingRun(const std::filesystem::path& output_dir, elastic::WorkerContext& context,
              const CheckpointerOptions& checkpointer_options, const GradSyncOptions& grad_sync_options);

  /// Logs what the user-state mirror cost the run, where there was one (rank 0).
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  /// After context.rejoin(): a Checkpointer and a GradSync over the new generation. A save in
  /// flight belonged to the lost generation and can never commit: it is cancelled (its
  /// uncommitted directory is removed by rank 0 of the new one); the GradSync keeps the mirrored
  /// RNG states of the last completed step.
  void rejoined(elastic::WorkerContext& context);
  /// The first step's clock starts (train time, samples/s).
  void start_clock() { start = window_start = Clock::now(); }
  /// One optimizer step done with this rank's `loss`.
  void count_step(double loss);
  /// The logging window's seconds so far; restart_window() opens the next one.
  double window_seconds() const { return std::chrono::duration<double>(Clock::now() - window_start).count(); }
  void restart_window();
  /// Mean seconds per step since the start.
  double seconds_per_step() const;
  /// The run's summary at `state`'s step.
  TrainOutput output(const TrainerState& state, int preempt_signal) const;
  /// `sampler` becomes the data order of `dataset` for `global_batch` as `args` ask
  /// (dataloader_drop_last, group_by_length: the lengths are read once, at the first call).
  void order_data(const Dataset& dataset, const TrainingArguments& args, std::int64_t global_batch);

  std::filesystem::path output_dir;
  GradSyncOptions grad_sync_options;
  CheckpointerOptions checkpointer_options;
  // Replaced when the process rejoins a new generation (its commits go through that generation).
  std::unique_ptr<Checkpointer> checkpointer;
  RunPlan plan;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<LrSchedule> schedule;
  GradScalerOptions scaler_options;  ///< used when fp16
  std::vector<torch::Tensor> params;
  std::optional<GradSync> grad_sync;
  std::optional<ResumableSampler> sampler;   // none when the caller supplies the batches
  std::vector<std::int64_t> sample_lengths;  ///< group_by_length's, read once
  std::optional<PreemptionSignals> preemption;
  Clock::time_point start;
  Clock::time_point window_start;
  double window_loss = 0.0;
  double total_loss = 0.0;
  std::int64_t window_steps = 0;
  std::int64_t steps_run = 0;
  std::int64_t last_saved = -1;  ///< the optimizer step of the last save
  nlohmann::json arguments;      ///< the arguments as every checkpoint records them (fixed for the run)
  bool ended = false;
  /// Which checkpoint begin() restores (resume_from_checkpoint against output_dir).
  ResumeChoice resume;
  /// False only in a replacement until it has healed: it has no training state to offer.
  bool holds_state = true;
  /// train() under `tenax run --recovery in-process`: RNG mirrored every step, losses healed.
  bool heals_in_process = false;
  /// With enable_step_recovery() and user state: every rank's registered state at the last step.
  std::optional<UserStateMirror> user_mirror;
  /// The preemption signal the ranks agreed on in the last step's gradient allreduce; read (and
  /// cleared) by the next preemption_agreed(), which then needs no collective of its own.
  std::optional<int> preemption_from_step;
};

}  // namespace tenax::sdk::detail
