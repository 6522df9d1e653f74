#include "tenax/sdk/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>
#include <utility>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "batch_prefetcher.h"
#include "commit_protocol.h"
#include "label_smoothing.h"
#include "loss_scaling.h"
#include "run_plan.h"
#include "step_flow.h"
#include "torch_compat.h"
#include "training_device.h"
#include "training_run.h"
#include "training_snapshot.h"
#include "tenax/core/blas_kernels.h"
#include "tenax/core/build_info.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/autocast.h"
#include "tenax/sdk/callbacks/default_callbacks.h"
#include "tenax/sdk/determinism.h"
#include "tenax/sdk/optimizer_groups.h"
#include "tenax/storage/checkpoint_directory.h"

namespace tenax::sdk {
namespace {

// One step's samples on this rank, as micro-batches of per_device samples (with
// dataloader_drop_last = false an epoch's last step may have fewer, the last one smaller).
// Runs on the prefetcher's threads: it reads only what it is given.
std::vector<Batch> load_micro_batches(const Dataset& dataset, const Collator& collator,
                                      const detail::BatchPrefetcher::Request& request, std::int64_t per_device) {
  const auto count = static_cast<std::int64_t>(request.indices.size());
  std::vector<Batch> micro_batches;
  for (std::int64_t first = 0; first < count; first += per_device) {
    const std::int64_t last = std::min(count, first + per_device);
    std::vector<Example> examples;
    examples.reserve(static_cast<std::size_t>(last - first));
    for (std::int64_t i = first; i < last; ++i) {
      examples.push_back(dataset.get_for_epoch(request.indices[static_cast<std::size_t>(i)], request.epoch));
    }
    micro_batches.push_back(collator(examples));
  }
  return micro_batches;
}

GradSyncOptions grad_sync_options(const TrainingArguments& args) {
  GradSyncOptions options;
  options.bucket_cap_bytes = static_cast<std::size_t>(args.ddp_bucket_cap_mb) << 20;
  options.overlap = args.ddp_overlap_backward;
  return options;
}

using Clock = std::chrono::steady_clock;

// The fields of GradSync's step flag: a preemption signal's number, and a regroup request.
constexpr int kSignalFlags = 0xFF;
constexpr int kRegroupFlag = 1 << 8;

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

}  // namespace

Trainer::Trainer(std::shared_ptr<Model> model, TrainingArguments args, std::shared_ptr<const Dataset> train_dataset,
                 elastic::WorkerContext& context, Collator collator)
    : model_(std::move(model)),
      args_(std::move(args)),
      train_dataset_(std::move(train_dataset)),
      context_(context),
      collator_(std::move(collator)) {
  if (!model_) throw ConfigError("Trainer: model is null");
  args_.validate();
  callbacks_ = default_callbacks(args_);  // progress bar, JSONL and TensorBoard per args
  state_.rank = context_.rank();
  state_.world_size = context_.world_size();
  state_.generation = context_.generation();
  const elastic::WorkerIdentity& id = context_.identity();
  device_ = training_device(args_.use_cpu, id.local_rank, id.local_world_size, torch::cuda::device_count());
  // Before the optimizer and GradSync exist: they hold the parameters where they will live.
  const auto params = model_->parameters();
  if (std::any_of(params.begin(), params.end(), [&](const torch::Tensor& p) { return p.device() != device_; })) {
    model_->to(device_);
  }
  if (args_.gradient_checkpointing) {
    if (!model_->supports_gradient_checkpointing()) {
      throw ConfigError(
          "TrainingArguments.gradient_checkpointing: this model does not support it (BERT, DistilBERT and ViT do); a "
          "model of your own can: override Model::supports_gradient_checkpointing and set_gradient_checkpointing, and "
          "run its layers through tenax::sdk::checkpoint_activations");
    }
    model_->set_gradient_checkpointing(true);
  }
  if (args_.fp16 && device_.is_cpu() && !compat::kCpuFloat16Autocast) {
    throw ConfigError("TrainingArguments.fp16: this build's libtorch (" + std::string(TORCH_VERSION) +
                      ") has no float16 autocast on CPUs; train on a GPU (the CUDA flavour, docs/gpu-clusters.md), "
                      "or use bf16 = true, which needs no loss scaling");
  }
}

Trainer::~Trainer() = default;

ModelOutput Trainer::forward_with_loss(Model& model, const Batch& batch) const {
  if (args_.label_smoothing_factor <= 0 || !batch.labels.defined()) return model.forward(batch);
  // As transformers' Trainer: the labels are kept from the model, which returns logits only.
  Batch inputs = batch;
  inputs.labels = torch::Tensor();
  ModelOutput out = model.forward(inputs);
  out.loss = detail::label_smoothed_loss(out.logits, batch.labels, args_.label_smoothing_factor);
  return out;
}

torch::Tensor Trainer::compute_loss(Model& model, const Batch& batch) {
  ModelOutput out = forward_with_loss(model, batch);
  if (!out.loss.defined()) throw Error("the model returned no loss; does the batch carry labels?");
  return out.loss;
}

torch::Tensor Trainer::training_step(Model& model, const Batch& batch) {
  model.train();
  torch::Tensor loss;
  {
    // The parameters' device decides which autocast applies (CPU or CUDA).
    AutocastGuard autocast(model.parameters().front().device().type(), args_.bf16 || args_.fp16,
                           args_.fp16 ? torch::kHalf : torch::kBFloat16);
    loss = compute_loss(model, batch);
  }
  // Divided only when accumulating: with one micro-batch the arithmetic stays exactly what it
  // was (bit-exact resume compares against runs without accumulation too).
  if (accumulation_steps_ > 1) loss = loss / static_cast<double>(accumulation_steps_);
  // fp16: the gradients are computed scaled, and unscaled after the allreduce (take_step).
  if (state_.loss_scale) {
    (loss * state_.loss_scale->scale).backward();
  } else {
    loss.backward();
  }
  return loss.detach();
}

std::unique_ptr<torch::optim::Optimizer> Trainer::create_optimizer() { return create_optimizer_for(*model_, args_); }

LrSchedule Trainer::create_scheduler(std::int64_t num_training_steps) {
  const auto& kwargs = args_.lr_scheduler_kwargs;
  return LrSchedule(LrScheduleOptions(args_.lr_scheduler_type.value(), args_.resolved_warmup_steps(num_training_steps),
                                      num_training_steps)
                        .base_lr(args_.learning_rate)
                        .num_cycles(kwargs.num_cycles)
                        .lr_end(kwargs.lr_end)
                        .power(kwargs.power));
}

NamedTensors Trainer::named_parameters() const {
  NamedTensors out;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

detail::TrainingRun& Trainer::run(const char* call) {
  if (!run_) throw std::logic_error(std::string("Trainer::") + call + " before Trainer::begin()");
  return *run_;
}

detail::LiveRun Trainer::live_run(const NamedTensors& parameters) {
  return detail::LiveRun{parameters, *run_->optimizer, state_, user_state_, context_.rank()};
}

std::int64_t Trainer::input_tokens(const std::vector<Batch>& micro_batches) {
  // transformers counts the numel of the model's main input (input_ids; pixel_values for vision
  // models), padding included, summed over the ranks.
  std::int64_t tokens = 0;
  for (const Batch& b : micro_batches) {
    const torch::Tensor& main = b.input_ids.defined()      ? b.input_ids
                                : b.pixel_values.defined() ? b.pixel_values
                                                           : b.inputs;
    if (main.defined()) tokens += main.numel();
  }
  context_.communicator().allreduce(&tokens, 1, elastic::ElementType::kInt64, elastic::ReduceOp::kSum);
  return tokens;
}

void Trainer::log_training(double window_loss, std::int64_t window_steps, double lr, double seconds,
                           double eta_seconds) {
  double sums[2] = {window_loss, static_cast<double>(window_steps)};
  context_.communicator().allreduce(sums, 2, elastic::ElementType::kFloat64, elastic::ReduceOp::kSum);
  Logs logs{{"loss", sums[0] / std::max(1.0, sums[1])},
            {"learning_rate", lr},
            {"epoch", state_.epoch},
            {"step", static_cast<double>(state_.global_step)},
            {"samples_per_second", seconds > 0 ? window_steps * state_.train_batch_size / seconds : 0.0}};
  if (args_.include_num_input_tokens_seen)
    logs["num_input_tokens_seen"] = static_cast<double>(state_.num_input_tokens_seen);
  state_.log_history.push_back(nlohmann::json(logs));
  // The progress bar (default) shows the same; the log line is for runs without it.
  logger("tenax.trainer", LogPolicy::kRankZeroOnly)
      ->log(args_.disable_tqdm ? spdlog::level::info : spdlog::level::debug,
            "step {}/{} | loss {:.6f} | lr {:.3e} | {:.1f} samples/s | epoch {:.2f} | ETA {}", state_.global_step,
            state_.max_steps, logs["loss"], lr, logs["samples_per_second"], state_.epoch, format_duration(eta_seconds));
  notify([&](TrainerCallback& cb) { cb.on_log(args_, state_, control_, logs); });
}

TrainOutput Trainer::train() {
  if (!train_dataset_) {
    throw ConfigError(
        "Trainer::train() needs a training dataset; without one, call begin() and step() with "
        "your own batches");
  }
  begin(/*resume=*/true);
  detail::TrainingRun& r = *run_;
  // transformers evaluates on start at every train() call, a resumed one too; a replacement
  // that joined the running job does not (its peers are not evaluating).
  if (args_.eval_on_start && !healed_at_begin_) {
    evaluate(*eval_dataset_, compute_metrics_);
    r.window_start = Clock::now();  // samples/s counts training only
  }
  // The next steps' batches load on dataloader_num_workers threads while a step computes.
  const std::int64_t workers = args_.dataloader_num_workers;
  const std::int64_t ahead = workers * (args_.dataloader_prefetch_factor > 0 ? args_.dataloader_prefetch_factor : 2);
  detail::BatchPrefetcher prefetcher(
      [dataset = train_dataset_, collator = collator_,
       per_device = args_.per_device_train_batch_size](const detail::BatchPrefetcher::Request& request) {
        return load_micro_batches(*dataset, collator, request, per_device);
      },
      static_cast<int>(workers), static_cast<int>(ahead));
  // Read afresh for every step: an in-process recovery may change the rank, the world and the plan.
  const auto request = [&](std::int64_t data_step) {
    return detail::BatchPrefetcher::Request{r.sampler->rank_indices(data_step, context_.rank(), context_.world_size()),
                                            data_step / r.plan.steps_per_epoch};
  };
  int preempt_signal = 0;
  while (state_.global_step < r.plan.max_steps && state_.global_step + skipped_steps_ < r.plan.data_step_limit &&
         !control_.should_training_stop) {
    const std::int64_t data_step = state_.global_step + skipped_steps_;
    if (data_step % r.plan.steps_per_epoch == 0) {
      notify([&](TrainerCallback& cb) { cb.on_epoch_begin(args_, state_, control_); });
    }
    const std::vector<Batch> micro_batches = prefetcher.take(request(data_step));
    // Steps 1..queued() ahead are queued already: only the steps beyond them need indices.
    for (std::int64_t k = static_cast<std::int64_t>(prefetcher.queued()) + 1;
         k <= ahead && data_step + k < r.plan.data_step_limit && state_.global_step + k < r.plan.max_steps; ++k) {
      prefetcher.prefetch(request(data_step + k));
    }
    try {
      take_step(micro_batches);  // this loop recovers by itself, whatever enable_step_recovery() said
      if ((preempt_signal = preemption_agreed()) != 0) break;
    } catch (const PeerLostError& e) {
      if (!recover_in_process(e.what())) throw;
    } catch (const TimeoutError& e) {
      if (!recover_in_process(e.what())) throw;
    }
  }
  TrainOutput out = end(preempt_signal);
  report_data_wait(prefetcher.waited_seconds(), out.train_runtime_s);
  return out;
}

std::optional<std::int64_t> Trainer::begin(bool resume) {
  if (run_) throw std::logic_error("Trainer::begin() called twice");
  if (args_.eval_strategy != IntervalStrategy::kNo && !eval_dataset_) {
    throw ConfigError("TrainingArguments.eval_strategy: '" + args_.eval_strategy.name() +
                      "' needs an evaluation dataset; call Trainer::set_eval_dataset() or set eval_strategy = \"no\"");
  }
  if (args_.eval_on_start && !eval_dataset_) {
    throw ConfigError(
        "TrainingArguments.eval_on_start: true needs an evaluation dataset; call Trainer::set_eval_dataset() or set "
        "eval_on_start = false");
  }
  if (args_.full_determinism) enable_full_determinism();
  plan_run(resume);
  // A replacement heals from a live peer; every other rank (and a replacement with no peer
  // that holds state) starts from disk.
  const std::optional<std::int64_t> started =
      begin_from_peers() ? std::optional<std::int64_t>(state_.global_step) : begin_from_disk(resume);
  notify([&](TrainerCallback& cb) { cb.on_train_begin(args_, state_, control_); });
  progress_.report(state_.global_step);
  if (args_.handle_preemption_signals) run_->preemption.emplace();
  run_->start_clock();
  return started;
}

void Trainer::plan_run(bool resume) {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  const int world = context_.world_size();
  CheckpointerOptions checkpoint_options;
  checkpoint_options.save_total_limit = static_cast<int>(args_.save_total_limit);
  checkpoint_options.metric_for_best_model = best_metric_key();
  checkpoint_options.greater_is_better = args_.resolved_greater_is_better();
  run_ =
      std::make_unique<detail::TrainingRun>(args_.output_dir, context_, checkpoint_options, grad_sync_options(args_));
  detail::TrainingRun& r = *run_;

  std::optional<detail::SavedRun> saved_run;
  if (resume) {
    const storage::CheckpointDirectory directory(r.checkpointer->root());
    const std::vector<std::int64_t> committed =
        std::filesystem::exists(r.checkpointer->root()) ? directory.committed_steps() : std::vector<std::int64_t>{};
    r.resume = detail::choose_resume(args_.resume_from_checkpoint, r.checkpointer->root(), committed,
                                     [&](std::int64_t step) { return directory.step_dir(step); });
    if (!r.resume.note.empty()) log->warn("{}", r.resume.note);
    saved_run = r.resume.from == detail::ResumeChoice::From::kGiven ? detail::saved_run_at(r.resume.dir)
                                                                    : detail::newest_saved_run(*r.checkpointer);
  }
  if (saved_run) detail::check_resumed_arguments(saved_run->arguments, args_, saved_run->dir);
  r.plan = detail::plan_run(args_, world,
                            train_dataset_ ? std::optional<std::int64_t>(train_dataset_->size()) : std::nullopt,
                            saved_run ? saved_run->global_batch : std::nullopt, args_.output_dir);
  if (r.plan.accumulation_changed_from) {
    log->warn(
        "elastic resume: the checkpoint's global batch is {}; with {} ranks x {} per device, "
        "gradient_accumulation_steps becomes {} (was {}) so that it stays {}",
        r.plan.global_batch, world, args_.per_device_train_batch_size, r.plan.accumulation_steps,
        *r.plan.accumulation_changed_from, r.plan.global_batch);
  }
  accumulation_steps_ = r.plan.accumulation_steps;
  if (train_dataset_) r.order_data(*train_dataset_, args_, r.plan.global_batch);
  state_.max_steps = r.plan.max_steps;
  state_.num_train_epochs = r.plan.num_train_epochs;
  state_.logging_steps = args_.logging_steps;
  state_.eval_steps = args_.resolved_eval_steps();
  state_.save_steps = args_.save_steps;
  state_.train_batch_size = r.plan.global_batch;

  r.arguments = args_.to_json();
  r.optimizer = create_optimizer();
  if (checkpointable_optimizer_name(*r.optimizer) == nullptr) {
    throw ConfigError(
        "Trainer::create_optimizer returned an optimizer whose state Tenax cannot checkpoint or heal; return an "
        "AdamW, SGD or tenax::sdk::Adafactor (tenax/sdk/optimizer_groups.h: create_optimizer_for)");
  }
  r.schedule.emplace(create_scheduler(r.plan.max_steps));
  if (args_.fp16) {
    r.scaler_options = grad_scaler_options();
    state_.loss_scale = LossScaleState{r.scaler_options.init_scale, 0, 0};  // a resume replaces it
  }
  r.params = model_->parameters();
  r.grad_sync.emplace(context_.communicator(), r.params, r.grad_sync_options);
  notify([&](TrainerCallback& cb) { cb.on_init_end(args_, state_, control_); });

  // In-process recovery needs a loop that knows a step failed: train()'s, or that of a caller
  // that drives step() itself and said it handles RecoveredError (enable_step_recovery(); the C
  // API's tenax_enable_in_process_recovery). Any other such caller could not redo a step it was
  // not told failed: its run never offers to heal, says why, and the agent restarts it from disk.
  r.heals_in_process = context_.recovers_in_process() && (r.plan.has_dataset || step_recovery_);
  if (context_.recovers_in_process() && !r.heals_in_process) {
    log->warn(
        "in-process recovery was asked for (`tenax run --recovery in-process`), but this program drives the "
        "steps itself and did not say it handles a healed step (Trainer::enable_step_recovery, "
        "tenax_enable_in_process_recovery): a lost peer restarts every worker from the newest checkpoint");
  }
  if (step_recovery_ && r.heals_in_process && user_state_ != nullptr && !user_state_->empty()) {
    r.user_mirror.emplace(*user_state_);
  }
}

std::optional<std::int64_t> Trainer::begin_from_disk(bool resume) {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  detail::TrainingRun& r = *run_;
  const int rank = context_.rank();
  const int world = context_.world_size();
  // Identical replicas first, then a per-rank random stream (dropout differs across ranks).
  r.grad_sync->broadcast_parameters(0);
  torch::manual_seed(detail::derived_seed(args_.seed, rank, 0));
  if ((context_.generation() > 0 || context_.restart_count() > 0) && !context_.identity().replacement) {
    notify([&](TrainerCallback& cb) { cb.on_restart(args_, state_, control_); });
  }
  skipped_steps_ = 0;
  const std::optional<std::int64_t> restored = resume ? restore() : std::nullopt;
  if (r.heals_in_process) {
    // Every rank's random state at the start, so that a replacement can continue a peer's
    // stream before the first step has mirrored it (the steps mirror it in their allreduce).
    r.grad_sync->gather_mirrors(capture_cpu_rng_state());
    // Likewise the registered state: a loss before the first step goes back to this point.
    if (r.user_mirror) {
      r.user_mirror->stage(context_.communicator());
      r.user_mirror->commit(state_.global_step);
    }
    context_.announce_in_process_recovery();
  }
  if (!restored) {
    if (resume) log->info("no committed checkpoint under {}; starting from scratch", args_.output_dir);
  } else {
    // The data position is (epoch, cursor); it is ahead of the step by the steps that
    // should_epoch_stop skipped, behind it by those an ignore_data_skip resume replayed.
    skipped_steps_ =
        detail::SavedDataOrder{args_.resolved_data_seed(), restored_position_, r.plan.global_batch}.skipped_steps(
            r.plan.steps_per_epoch, state_.global_step);
    if (args_.ignore_data_skip && r.plan.has_dataset) {
      // transformers' meaning: the epoch the run was in starts again from its first batch (the
      // same order), while the step, the schedule and everything else go on from the checkpoint.
      const std::int64_t data_step = state_.global_step + skipped_steps_;
      const std::int64_t into_epoch = data_step % r.plan.steps_per_epoch;
      skipped_steps_ -= into_epoch;
      if (into_epoch > 0) {
        log->warn(
            "ignore_data_skip: epoch {} starts again from its first batch ({} batches of it were done); the run "
            "goes on from step {} but no longer sees the data of an uninterrupted one",
            data_step / r.plan.steps_per_epoch, into_epoch, state_.global_step);
      }
    }
    r.last_saved = state_.global_step;
  }
  log->info("{}", version_line());
  if (const BlasReport blas = report_loaded_blas(); blas.fallback) {
    logger("tenax.trainer")->warn("{}", blas.line);  // from every rank: nodes can differ
  } else {
    log->info("{}", blas.line);
  }
  if (r.plan.has_dataset) {
    log->info("training {} steps: {} ranks x {} per device x {} accumulation = global batch {}, {} steps per epoch",
              r.plan.max_steps, world, args_.per_device_train_batch_size, accumulation_steps_, r.plan.global_batch,
              r.plan.steps_per_epoch);
  } else {
    log->info("training one step per call on the caller's batches: {} ranks, gradient averaged over all of them",
              world);
  }
  if (args_.save_async && user_state_ != nullptr) {
    // The caller's arrays (a simulation's fields) are the one large thing a save copies
    // before it returns; their snapshot buffers are mapped now rather than inside the
    // caller's loop at the first save (Checkpointer::reserve_snapshot).
    r.checkpointer->reserve_snapshot(user_state_->tensors(context_.rank()));
  }
  return restored;
}

double Trainer::step(const std::vector<Batch>& micro_batches) {
  detail::TrainingRun& r = run("step()");
  if (!step_recovery_ || !r.heals_in_process) return take_step(micro_batches);
  // The heal happens here, inside the call, so that the caller learns only that its step did
  // not complete and where the job stands (RecoveredError).
  std::optional<std::int64_t> healed;
  try {
    return take_step(micro_batches);
  } catch (const PeerLostError& e) {
    if (!(healed = recover(e.what()))) throw;
  } catch (const TimeoutError& e) {
    if (!(healed = recover(e.what()))) throw;
  }
  throw RecoveredError(
      "the step did not complete: a peer was lost and the job healed in process; every rank stands at "
      "optimizer step " +
          std::to_string(*healed) +
          ", the last one completed, with its registered state as it was when that step was called; go "
          "on from there",
      *healed);
}

double Trainer::take_step(const std::vector<Batch>& micro_batches) {
  detail::TrainingRun& r = run("step()");
  // Fewer only at an epoch's short end, which train() alone produces (dataloader_drop_last).
  const auto micro_count = static_cast<std::int64_t>(micro_batches.size());
  const bool short_end = train_dataset_ && !args_.dataloader_drop_last && micro_count > 0;
  if (micro_count != accumulation_steps_ && !(short_end && micro_count < accumulation_steps_)) {
    throw ConfigError("Trainer::step: got " + std::to_string(micro_batches.size()) +
                      " micro-batches, the run accumulates gradient_accumulation_steps = " +
                      std::to_string(accumulation_steps_) + " per optimizer step");
  }
  const std::int64_t step = state_.global_step;
  const std::int64_t data_step = step + skipped_steps_;  // which global batch of the data order
  notify([&](TrainerCallback& cb) { cb.on_step_begin(args_, state_, control_); });

  // Every rank's registered state as the caller hands it to this step; exchanged right after the
  // step's gradient allreduce (GradSync owns the communicator from prepare_for_backward() until
  // then), it becomes the point a heal goes back to once the step completes.
  if (r.user_mirror) r.user_mirror->capture(context_.rank());
  // Gradients accumulate locally over the micro-batches and are synchronised once, after the last.
  r.grad_sync->zero_grad();  // with peers in place (views into the buckets); alone, to none
  torch::Tensor loss;
  for (std::size_t micro = 0; micro < micro_batches.size(); ++micro) {
    // The last micro-batch's backward finishes the gradients: its buckets go out during it.
    if (micro + 1 == micro_batches.size()) r.grad_sync->prepare_for_backward();
    torch::Tensor micro_loss = training_step(*model_, batch_on(micro_batches[micro], device_));
    loss = micro == 0 ? micro_loss : loss + micro_loss;
    if (micro + 1 < micro_batches.size())
      notify([&](TrainerCallback& cb) { cb.on_substep_end(args_, state_, control_); });
  }
  // With in-process recovery every rank's random state (after this step's dropout) rides in
  // the gradient allreduce: whoever completes the step holds what a replacement continues from.
  // So does the preemption flag: every rank learns of a signal in the step's own collective.
  // So is a regroup: the agent declared a newer generation that no failed collective of this
  // one told this rank about (GradSync's flag fields: a signal's number, then this request).
  r.preemption_from_step.reset();
  const int request = (r.preemption ? r.preemption->requested() : 0) |
                      (r.heals_in_process && context_.generation_superseded() ? kRegroupFlag : 0);
  const int agreed = r.grad_sync->synchronize(r.heals_in_process ? capture_cpu_rng_state() : torch::Tensor(), request);
  // Every rank's registered state, right after the allreduce: the ranks arrive together, so the
  // wait for a late peer is paid once, in the allreduce. No rank applies this step's update without
  // every rank's state of it: a peer lost in between fails the step on every rank that has not
  // completed it. (Riding in the allreduce instead, as the random states do, was tried and measured
  // slower on 2 cores, even for a 68 KB state: see UserStateMirror.)
  if (r.user_mirror) r.user_mirror->exchange(context_.communicator());
  if (r.preemption) r.preemption_from_step = agreed & kSignalFlags;
  // Before the update, so that a peer lost here fails the step on every rank, as in synchronize().
  if (args_.include_num_input_tokens_seen) state_.num_input_tokens_seen += input_tokens(micro_batches);
  // fp16: gradients with an inf or a nan (the same on every rank after the allreduce) skip the
  // update, and the schedule with it (transformers steps its scheduler only when the optimizer ran).
  bool skip_update = false;
  if (state_.loss_scale) skip_update = detail::unscale_gradients(r.params, state_.loss_scale->scale);
  if (!skip_update && args_.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(r.params, args_.max_grad_norm);
  const std::int64_t schedule_step = step - (state_.loss_scale ? state_.loss_scale->skipped_steps : 0);
  const double lr = args_.learning_rate * r.schedule->multiplier(schedule_step);
  for (auto& group : r.optimizer->param_groups()) group.options().set_lr(lr);
  // An async save copies the parameters and the optimizer state while this step's forward
  // and backward ran; the update must not change them before that copy is done.
  r.checkpointer->wait_for_snapshot();
  if (!skip_update) r.optimizer->step();
  if (state_.loss_scale) {
    state_.loss_scale = detail::next_loss_scale(*state_.loss_scale, skip_update, r.scaler_options);
    if (skip_update) {
      logger("tenax.trainer", LogPolicy::kRankZeroOnly)
          ->info("fp16: step {} had inf/nan gradients and was skipped; the loss scale goes to {}", step + 1,
                 state_.loss_scale->scale);
    }
  }

  const double loss_value = loss.item<double>();
  r.count_step(loss_value);
  state_.global_step = step + 1;
  if (r.user_mirror) r.user_mirror->commit(state_.global_step);
  state_.epoch = static_cast<double>(data_step + 1) / static_cast<double>(r.plan.steps_per_epoch);
  progress_.report(state_.global_step);
  // transformers' DefaultFlowCallback: the strategies raise the flags before the callbacks
  // see them, so a callback can also lower them.
  const detail::StepFlow flow =
      detail::flow_after_step(r.plan, args_.logging_steps, args_.save_steps, state_.global_step, data_step);
  bool epoch_end = flow.epoch_end;
  control_.should_log = control_.should_log || flow.log;
  control_.should_evaluate = control_.should_evaluate || flow.evaluate;
  control_.should_save = control_.should_save || flow.save;
  notify([&](TrainerCallback& cb) { cb.on_step_end(args_, state_, control_); });
  if (control_.should_epoch_stop && !epoch_end && r.plan.has_dataset) {
    // The rest of this epoch's data is skipped (transformers breaks its epoch loop): the
    // next step starts the next epoch; the epoch strategies apply now.
    skipped_steps_ += r.plan.steps_per_epoch - (data_step + 1) % r.plan.steps_per_epoch;
    state_.epoch =
        static_cast<double>(state_.global_step + skipped_steps_) / static_cast<double>(r.plan.steps_per_epoch);
    epoch_end = true;
    if (r.plan.logging == detail::IntervalStrategy::kEpoch) control_.should_log = true;
    if (r.plan.eval == detail::IntervalStrategy::kEpoch) control_.should_evaluate = true;
    if (r.plan.save == SaveStrategy::kEpoch) control_.should_save = true;
  }
  control_.should_epoch_stop = false;
  if (epoch_end) notify([&](TrainerCallback& cb) { cb.on_epoch_end(args_, state_, control_); });
  act_on_control(lr);
  if ((agreed & kRegroupFlag) != 0) {
    // Every rank completed this step and agreed in its collective: they leave together, so the
    // next generation heals with nothing to redo.
    logger("tenax.trainer", LogPolicy::kRankZeroOnly)
        ->warn(
            "the agents declared a generation after {} while it ran; every rank leaves it after step {} and "
            "regroups",
            context_.generation(), state_.global_step);
    heal_until_healed(Clock::now(), /*rejoin_first=*/true);
  }
  return loss_value;
}

void Trainer::act_on_control(double lr) {
  detail::TrainingRun& r = *run_;
  // Log, evaluate, save: in transformers' order, so a save carries this step's evaluation.
  if (control_.should_log) {
    control_.should_log = false;
    const double per_step = r.seconds_per_step();
    const double remaining = r.plan.has_dataset ? static_cast<double>(r.plan.max_steps - state_.global_step) : 0.0;
    log_training(r.window_loss, r.window_steps, lr, r.window_seconds(), per_step * remaining);
    r.restart_window();
  }
  Logs eval_metrics;
  if (control_.should_evaluate) {
    control_.should_evaluate = false;
    if (!eval_dataset_) {
      throw ConfigError(
          "a callback asked for an evaluation (TrainerControl.should_evaluate) but there is no "
          "evaluation dataset; call Trainer::set_eval_dataset()");
    }
    eval_metrics = evaluate(*eval_dataset_, compute_metrics_);
    r.window_start = Clock::now();  // samples/s counts training only
    // save_strategy "best": a save exactly when this evaluation improved the metric (transformers
    // sets the flag so, over a callback's request too).
    if (r.plan.save == SaveStrategy::kBest) control_.should_save = is_new_best(eval_metrics);
  }
  if (control_.should_save) {
    control_.should_save = false;
    save(eval_metrics);
  }
}

int Trainer::preemption_agreed() {
  detail::TrainingRun& r = run("preemption_agreed()");
  if (!r.preemption) return 0;
  // Every rank learns of a preemption signal at the same call, so all of them stop at the same
  // step and save one consistent checkpoint (DESIGN.md decision 7). Right after a step the
  // answer came with its gradients; otherwise it takes one small allreduce. Either way every
  // rank reads the same one: all of them call step() and preemption_agreed() in the same order.
  if (const std::optional<int> agreed = std::exchange(r.preemption_from_step, std::nullopt)) return *agreed;
  std::int64_t requested = r.preemption->requested();
  context_.communicator().allreduce(&requested, 1, elastic::ElementType::kInt64, elastic::ReduceOp::kMax);
  return static_cast<int>(requested);
}

ModelOutput Trainer::predict_batch(const Batch& batch) {
  const bool was_training = model_->is_training();
  model_->eval();
  ModelOutput out;
  {
    torch::NoGradGuard no_grad;
    out = model_->forward(batch_on(batch, device_));
  }
  model_->train(was_training);
  return out;
}

void Trainer::log(const Logs& logs, std::optional<std::int64_t> step) {
  TrainerState state = state_;
  if (step) state.global_step = *step;
  TrainerControl control;
  notify([&](TrainerCallback& cb) { cb.on_log(args_, state, control, logs); });
}

TrainOutput Trainer::end(int preempt_signal) {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  detail::TrainingRun& r = run("end()");
  if (r.ended) throw std::logic_error("Trainer::end() called twice");
  r.ended = true;
  // Without a dataset the caller names every checkpoint (its solver step) and saves it itself.
  if (r.plan.has_dataset && r.last_saved != state_.global_step) save({});
  // The last save must be known to be committed before train() returns: nothing is lost.
  if (auto last = r.checkpointer->wait()) report_save(*last, /*must_succeed=*/true);
  if (args_.load_best_model_at_end && preempt_signal == 0) {
    // The committed manifests decide (a save that failed is never the best one).
    const std::optional<std::int64_t> best =
        detail::best_step(r.checkpointer->root(), best_metric_key(), args_.resolved_greater_is_better());
    if (!best) {
      log->warn("load_best_model_at_end: no committed checkpoint records {}; keeping the last model",
                best_metric_key());
    } else if (*best != state_.global_step) {
      const auto dir = storage::CheckpointDirectory(r.checkpointer->root()).step_dir(*best);
      load_parameters_from(dir);
      log->info("loaded the best model from {} ({} = {})", dir.string(), best_metric_key(),
                state_.best_metric ? *state_.best_metric : 0.0);
    } else {
      log->info("the best model ({} = {}) is the last one, step {}: kept", best_metric_key(),
                state_.best_metric ? *state_.best_metric : 0.0, *best);
    }
  }
  if (preempt_signal != 0) {
    log->warn(
        "preempted by {} at step {}: every rank stopped here and the checkpoint is saved; exit {} "
        "to be requeued, and the job resumes from this step",
        preempt_signal == SIGUSR1   ? "SIGUSR1"
        : preempt_signal == SIGTERM ? "SIGTERM"
                                    : "a signal",
        state_.global_step, kExitPreempted);
    notify([&](TrainerCallback& cb) { cb.on_preempt(args_, state_, control_, preempt_signal); });
  }
  notify([&](TrainerCallback& cb) { cb.on_train_end(args_, state_, control_); });
  progress_.finish();  // what follows (evaluation, teardown) is not judged as training

  const TrainOutput out = r.output(state_, preempt_signal);
  log->info("training finished at step {} ({:.1f} s, {:.1f} samples/s)", out.global_step, out.train_runtime_s,
            out.train_samples_per_second);
  return out;
}

}  // namespace tenax::sdk
