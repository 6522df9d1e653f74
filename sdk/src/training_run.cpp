#include "training_run.h"

#include <algorithm>
#include <utility>

#include "tenax/core/logging.h"

namespace tenax::sdk::detail {

void TrainingRun::order_data(const Dataset& dataset, const TrainingArguments& args, std::int64_t global_batch) {
  SamplerOptions options;
  options.drop_last = args.dataloader_drop_last;
  if (args.group_by_length) {
    if (sample_lengths.empty()) {
      sample_lengths.reserve(static_cast<std::size_t>(dataset.size()));
      for (std::int64_t i = 0; i < dataset.size(); ++i) sample_lengths.push_back(dataset.length(i));
    }
    options.lengths = sample_lengths;
  }
  sampler.emplace(dataset.size(), global_batch, args.resolved_data_seed(), std::move(options));
}

TrainingRun::TrainingRun(const std::filesystem::path& output_dir, elastic::WorkerContext& context,
                         const CheckpointerOptions& checkpointer_options, const GradSyncOptions& grad_sync_options)
    : output_dir(output_dir),
      grad_sync_options(grad_sync_options),
      checkpointer_options(checkpointer_options),
      checkpointer(std::make_unique<Checkpointer>(output_dir, context, checkpointer_options)) {}

TrainingRun::~TrainingRun() {
  if (!user_mirror || user_mirror->stages() == 0) return;
  // What in-process recovery's copy of the registered state cost this run, with the step API
  // (the C API) too, which never calls Trainer::end() (issue 37, point 4).
  try {
    const double run_s =
        start == Clock::time_point{} ? 0.0 : std::chrono::duration<double>(Clock::now() - start).count();
    logger("tenax.trainer", LogPolicy::kRankZeroOnly)
        ->info(
            "in-process recovery mirrored the registered state ({} bytes from each rank) at {} steps: {:.3f} ms "
            "per step, {:.2f} % of the {:.1f} s since the first step",
            user_mirror->row_bytes(), user_mirror->stages(),
            1e3 * user_mirror->stage_seconds() / static_cast<double>(user_mirror->stages()),
            run_s > 0 ? 100.0 * user_mirror->stage_seconds() / run_s : 0.0, run_s);
  } catch (...) {  // a destructor: the report is not worth a terminate()
  }
}

void TrainingRun::rejoined(elastic::WorkerContext& context) {
  checkpointer.reset();
  checkpointer = std::make_unique<Checkpointer>(output_dir, context, checkpointer_options);
  const torch::Tensor mirrors = grad_sync->mirrors();
  grad_sync.emplace(context.communicator(), params, grad_sync_options);
  grad_sync->set_mirrors(mirrors);
}

void TrainingRun::count_step(double loss) {
  window_loss += loss;
  total_loss += loss;
  ++window_steps;
  ++steps_run;
}

void TrainingRun::restart_window() {
  window_loss = 0.0;
  window_steps = 0;
  window_start = Clock::now();
}

double TrainingRun::seconds_per_step() const {
  return std::chrono::duration<double>(Clock::now() - start).count() / std::max<std::int64_t>(1, steps_run);
}

TrainOutput TrainingRun::output(const TrainerState& state, int preempt_signal) const {
  TrainOutput out;
  out.global_step = state.global_step;
  out.training_loss = steps_run > 0 ? total_loss / static_cast<double>(steps_run) : 0.0;
  out.train_runtime_s = std::chrono::duration<double>(Clock::now() - start).count();
  out.train_samples_per_second = out.train_runtime_s > 0 ? steps_run * plan.global_batch / out.train_runtime_s : 0.0;
  out.resumed_from_step = state.resumed_from_step;
  out.preempted = preempt_signal != 0;
  out.preempt_signal = preempt_signal;
  return out;
}

}  // namespace tenax::sdk::detail
