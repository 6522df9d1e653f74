#include "tenax/sdk/trainer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <optional>

#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/grad_sync.h"
#include "tenax/sdk/preemption.h"
#include "tenax/sdk/sampler.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"

namespace tenax::sdk {
namespace {

using Clock = std::chrono::steady_clock;

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

// The per-rank seed of a fresh run; also how a rank with no saved RNG state derives one:
// a fixed function of (seed, rank, step), documented in README ("Resume").
std::uint64_t derived_seed(std::uint64_t seed, int rank, std::int64_t step) {
  return seed + 1000003ull * static_cast<std::uint64_t>(rank) + 7919ull * static_cast<std::uint64_t>(step);
}

// The global batch recorded by the newest committed checkpoint that opens, if any (the
// manifest only: no shard is read).
std::optional<std::int64_t> saved_global_batch(const Checkpointer& checkpointer) {
  storage::CheckpointDirectory directory(checkpointer.root());
  const auto steps = directory.committed_steps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    auto reader = storage::CheckpointReader::open(directory.step_dir(*it));
    if (!reader.is_ok()) continue;
    const nlohmann::json& state = reader.value().manifest().trainer_state;
    if (state.contains("train_batch_size") && state["train_batch_size"].is_number_integer()) {
      return state["train_batch_size"].get<std::int64_t>();
    }
  }
  return std::nullopt;
}

}  // namespace

Trainer::Trainer(std::shared_ptr<Model> model, TrainingArguments args,
                 std::shared_ptr<const Dataset> train_dataset, elastic::WorkerContext& context,
                 Collator collator)
    : model_(std::move(model)),
      args_(std::move(args)),
      train_dataset_(std::move(train_dataset)),
      context_(context),
      collator_(std::move(collator)) {
  if (!model_) throw ConfigError("Trainer: model is null");
  if (!train_dataset_) throw ConfigError("Trainer: train_dataset is null");
  args_.validate();
  state_.rank = context_.rank();
  state_.world_size = context_.world_size();
  state_.generation = context_.generation();
}

Trainer::~Trainer() = default;

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) {
  callbacks_.push_back(std::move(callback));
}

torch::Tensor Trainer::compute_loss(Model& model, const Batch& batch) {
  ModelOutput out = model.forward(batch);
  if (!out.loss.defined()) throw Error("the model returned no loss; does the batch carry labels?");
  return out.loss;
}

torch::Tensor Trainer::training_step(Model& model, const Batch& batch) {
  model.train();
  torch::Tensor loss = compute_loss(model, batch);
  // Divided only when accumulating: with one micro-batch the arithmetic stays exactly what it
  // was (bit-exact resume compares against runs without accumulation too).
  if (accumulation_steps_ > 1) loss = loss / static_cast<double>(accumulation_steps_);
  loss.backward();
  return loss.detach();
}

std::unique_ptr<torch::optim::AdamW> Trainer::create_optimizer() {
  torch::optim::AdamWOptions options(args_.learning_rate);
  options.betas({args_.adam_beta1, args_.adam_beta2}).eps(args_.adam_epsilon).weight_decay(args_.weight_decay);
  return std::make_unique<torch::optim::AdamW>(model_->parameters(), options);
}

LrSchedule Trainer::create_scheduler(std::int64_t num_training_steps) {
  return LrSchedule(parse_lr_scheduler_type(args_.lr_scheduler_type),
                    args_.resolved_warmup_steps(num_training_steps), num_training_steps);
}

NamedTensors Trainer::named_parameters() const {
  NamedTensors out;
  for (const auto& item : model_->named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

Batch Trainer::load_batch(const std::vector<std::int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (std::int64_t i : indices) examples.push_back(train_dataset_->get(i));
  return collator_(examples);
}

bool Trainer::restore(Checkpointer& checkpointer, torch::optim::AdamW& optimizer) {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  const int rank = context_.rank();
  const std::string my_rng_prefix = "rng/rank" + std::to_string(rank) + "/";
  // Parameters are read in place (no second copy of the model in memory); the optimizer's
  // state is allocated by the load and adopted as is.
  std::map<std::string, torch::Tensor> param_by_key;
  for (const auto& [name, param] : named_parameters()) param_by_key.emplace("model/" + name, param.detach());
  auto loaded = checkpointer.load_latest(
      [&](const std::string& name) {
        return starts_with(name, "model/") || starts_with(name, "optim/") || starts_with(name, my_rng_prefix) ||
               name == "sampler" || (user_state_ != nullptr && user_state_->wants(name, rank));
      },
      [&](const std::string& name) {
        const auto it = param_by_key.find(name);
        return it == param_by_key.end() ? torch::Tensor() : it->second;
      });
  if (!loaded) return false;

  // The data position first: a changed seed or global batch would silently change which
  // samples come next, so both are refused (the run stops) before the optimizer, the RNG and
  // the step are touched; the parameters were already read in place.
  torch::Tensor sampler = loaded->get("sampler");
  if (!sampler.defined() || sampler.scalar_type() != torch::kInt64 || sampler.numel() != 4) {
    throw StorageError(loaded->dir.string() + ": the sampler position is missing or malformed");
  }
  const auto saved_seed = static_cast<std::uint64_t>(sampler[0].item<std::int64_t>());
  const std::int64_t saved_global_batch = sampler[3].item<std::int64_t>();
  if (saved_seed != args_.seed) {
    throw ConfigError("TrainingArguments.seed: the checkpoint in " + loaded->dir.string() +
                      " was trained with seed " + std::to_string(saved_seed) + ", this run has " +
                      std::to_string(args_.seed) +
                      "; resuming would change the data order. Use the same seed or another output_dir");
  }
  if (saved_global_batch != state_.train_batch_size) {  // train() adapts accumulation first
    throw StorageError(loaded->dir.string() + ": the sampler says global batch " + std::to_string(saved_global_batch) +
                       " but the manifest said " + std::to_string(state_.train_batch_size));
  }

  torch::NoGradGuard no_grad;
  const NamedTensors params = named_parameters();
  for (const auto& [name, param] : params) {
    torch::Tensor saved = loaded->get("model/" + name);
    if (!saved.defined()) {
      throw StorageError(loaded->dir.string() + ": parameter '" + name +
                         "' is missing from the checkpoint; was it written by another model?");
    }
    if (!saved.sizes().equals(param.sizes())) {
      throw StorageError(loaded->dir.string() + ": parameter '" + name + "' has shape " +
                         c10::str(saved.sizes()) + " in the checkpoint but " + c10::str(param.sizes()) +
                         " in the model");
    }
    if (saved.data_ptr() != param.data_ptr()) param.copy_(saved);  // else it was read in place
  }
  auto lookup = [&](const std::string& n) { return loaded->get(n); };
  restore_adamw_state(optimizer, params, lookup);
  if (user_state_ != nullptr) user_state_->restore(rank, lookup);

  if (!restore_rng_states(rank, lookup)) {
    // A rank the writing world did not have: a deterministic stream of its own (README, "Resume").
    torch::manual_seed(derived_seed(args_.seed, rank, loaded->step));
    logger("tenax.trainer")->warn("checkpoint has no RNG state for rank {} (it was written by {} ranks); "
                                  "derived one from (seed, rank, step)", rank, loaded->world_size);
  }
  state_.global_step = loaded->step;
  state_.resumed_from_step = loaded->step;
  if (loaded->trainer_state.contains("log_history") && loaded->trainer_state["log_history"].is_array()) {
    state_.log_history = loaded->trainer_state["log_history"].get<std::vector<nlohmann::json>>();
  }
  log->info("resumed from {} at step {} (generation {}, restart {}{})", loaded->dir.string(), loaded->step,
            context_.generation(), context_.restart_count(),
            loaded->world_size != context_.world_size()
                ? ", resharded from " + std::to_string(loaded->world_size) + " to " +
                      std::to_string(context_.world_size()) + " ranks"
                : std::string());
  notify([&](TrainerCallback& cb) { cb.on_load(args_, state_, control_, loaded->dir.string()); });
  return true;
}

void Trainer::save(Checkpointer& checkpointer, torch::optim::AdamW& optimizer, std::int64_t steps_per_epoch) {
  const int rank = context_.rank();
  SaveRequest request;
  request.step = state_.global_step;
  request.epoch = state_.global_step / steps_per_epoch;
  // Parameters and optimizer state change only in optimizer.step(), which waits for the
  // snapshot (train()): the writer copies them late, overlapping the next step's compute.
  // Everything else (sampler, RNG, user state, which callbacks may change) is copied now.
  const NamedTensors params = named_parameters();
  NamedTensors& late = args_.save_async ? request.replicated_copied_late : request.replicated;
  for (const auto& [name, p] : params) late.emplace_back("model/" + name, p.detach());
  for (auto& entry : capture_adamw_state(optimizer, params, Capture::kView)) late.push_back(std::move(entry));
  const std::int64_t cursor = (state_.global_step % steps_per_epoch) * state_.train_batch_size;
  request.replicated.emplace_back(
      "sampler", torch::tensor({static_cast<std::int64_t>(args_.seed), request.epoch, cursor, state_.train_batch_size},
                               torch::kInt64));
  request.per_rank = capture_rng_states(rank);
  if (user_state_ != nullptr) user_state_->capture(rank, request.replicated, request.per_rank);
  request.trainer_state = state_.to_json();
  request.arguments = args_.to_json();

  std::optional<SaveResult> previous = checkpointer.save_async(std::move(request));
  if (previous) report_save(*previous, /*must_succeed=*/args_.on_save_error == "stop");
  if (!args_.save_async) {
    if (auto done = checkpointer.wait()) report_save(*done, args_.on_save_error == "stop");
  }
}

void Trainer::report_save(const SaveResult& result, bool must_succeed) {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  if (result.committed) {
    log->info("saved checkpoint {} (step stalled {:.3f} s for the snapshot; write + commit {:.3f} s)",
              result.dir.string(), result.snapshot_seconds, result.write_seconds);
    notify([&](TrainerCallback& cb) { cb.on_save(args_, state_, control_, result.dir.string()); });
    return;
  }
  logger("tenax.trainer")->error("checkpoint of step {} failed: {}", result.step, result.error);
  notify([&](TrainerCallback& cb) { cb.on_save_error(args_, state_, control_, result.error); });
  if (must_succeed) throw StorageError(result.error);
  log->warn("training goes on (on_save_error = continue); the previous checkpoint is intact");
}

TrainOutput Trainer::train() {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  const int rank = context_.rank();
  const int world = context_.world_size();
  CheckpointerOptions checkpoint_options;
  checkpoint_options.save_total_limit = static_cast<int>(args_.save_total_limit);
  checkpoint_options.metric_for_best_model = args_.metric_for_best_model;
  checkpoint_options.greater_is_better = args_.greater_is_better;
  Checkpointer checkpointer(args_.output_dir, context_, checkpoint_options);

  // DESIGN.md decision 4: the global batch stays the checkpoint's across elastic resizes;
  // gradient accumulation absorbs the change of world size.
  accumulation_steps_ = args_.gradient_accumulation_steps;
  const std::int64_t per_pass = args_.per_device_train_batch_size * world;
  if (const auto saved = saved_global_batch(checkpointer); saved && *saved != per_pass * accumulation_steps_) {
    if (*saved % per_pass != 0) {
      throw ConfigError("TrainingArguments.per_device_train_batch_size: the checkpoint under " + args_.output_dir +
                        " was trained with a global batch of " + std::to_string(*saved) +
                        " samples, which " + std::to_string(world) + " ranks x " +
                        std::to_string(args_.per_device_train_batch_size) +
                        " per device cannot divide; choose per_device_train_batch_size so that world size x "
                        "per_device_train_batch_size divides " + std::to_string(*saved) +
                        " (gradient_accumulation_steps is then set to keep it)");
    }
    const std::int64_t adjusted = *saved / per_pass;
    log->warn("elastic resume: the checkpoint's global batch is {}; with {} ranks x {} per device, "
              "gradient_accumulation_steps becomes {} (was {}) so that it stays {}",
              *saved, world, args_.per_device_train_batch_size, adjusted, accumulation_steps_, *saved);
    accumulation_steps_ = adjusted;
  }
  const std::int64_t global_batch = per_pass * accumulation_steps_;
  ResumableSampler sampler(train_dataset_->size(), global_batch, args_.seed);
  const std::int64_t steps_per_epoch = sampler.steps_per_epoch();
  const std::int64_t max_steps =
      args_.max_steps > 0 ? args_.max_steps
                          : static_cast<std::int64_t>(std::ceil(args_.num_train_epochs * steps_per_epoch));
  state_.max_steps = max_steps;
  state_.num_train_epochs = (max_steps + steps_per_epoch - 1) / steps_per_epoch;
  state_.logging_steps = args_.logging_steps;
  state_.save_steps = args_.save_steps;
  state_.train_batch_size = global_batch;

  std::unique_ptr<torch::optim::AdamW> optimizer = create_optimizer();
  const LrSchedule schedule = create_scheduler(max_steps);
  std::vector<torch::Tensor> params = model_->parameters();
  GradSync grad_sync(context_.communicator(), params);
  notify([&](TrainerCallback& cb) { cb.on_init_end(args_, state_, control_); });

  // Identical replicas first, then a per-rank random stream (dropout differs across ranks).
  grad_sync.broadcast_parameters(0);
  torch::manual_seed(derived_seed(args_.seed, rank, 0));
  const bool resumed = restore(checkpointer, *optimizer);
  if (!resumed) {
    log->info("no committed checkpoint under {}; starting from scratch", args_.output_dir);
  }

  log->info("training {} steps: {} ranks x {} per device x {} accumulation = global batch {}, {} steps per epoch",
            max_steps, world, args_.per_device_train_batch_size, accumulation_steps_, global_batch, steps_per_epoch);
  notify([&](TrainerCallback& cb) { cb.on_train_begin(args_, state_, control_); });

  std::optional<PreemptionSignals> preemption;
  if (args_.handle_preemption_signals) preemption.emplace();
  int preempt_signal = 0;

  const auto start = Clock::now();
  auto window_start = start;
  double window_loss = 0.0, total_loss = 0.0;
  std::int64_t window_steps = 0, steps_run = 0;
  std::int64_t last_saved = resumed ? state_.global_step : -1;

  while (state_.global_step < max_steps && !control_.should_training_stop) {
    const std::int64_t step = state_.global_step;
    if (step % steps_per_epoch == 0) notify([&](TrainerCallback& cb) { cb.on_epoch_begin(args_, state_, control_); });
    notify([&](TrainerCallback& cb) { cb.on_step_begin(args_, state_, control_); });

    // This rank's slice of the global batch, in micro-batches of per_device samples; gradients
    // accumulate locally and are synchronised once, after the last micro-batch.
    const std::vector<std::int64_t> indices = sampler.rank_indices(step, rank, world);
    optimizer->zero_grad();
    torch::Tensor loss;
    for (std::int64_t micro = 0; micro < accumulation_steps_; ++micro) {
      const auto first = indices.begin() + micro * args_.per_device_train_batch_size;
      const Batch batch = load_batch({first, first + args_.per_device_train_batch_size});
      torch::Tensor micro_loss = training_step(*model_, batch);
      loss = micro == 0 ? micro_loss : loss + micro_loss;
    }
    grad_sync.synchronize();
    if (args_.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(params, args_.max_grad_norm);
    const double lr = args_.learning_rate * schedule.multiplier(step);
    for (auto& group : optimizer->param_groups()) group.options().set_lr(lr);
    // An async save copies the parameters and the optimizer state while this step's forward
    // and backward ran; the update must not change them before that copy is done.
    checkpointer.wait_for_snapshot();
    optimizer->step();

    const double loss_value = loss.item<double>();
    window_loss += loss_value;
    total_loss += loss_value;
    ++window_steps;
    ++steps_run;
    state_.global_step = step + 1;
    state_.epoch = static_cast<double>(state_.global_step) / static_cast<double>(steps_per_epoch);
    notify([&](TrainerCallback& cb) { cb.on_step_end(args_, state_, control_); });

    if (state_.global_step % args_.logging_steps == 0 || control_.should_log || state_.global_step == max_steps) {
      double sums[2] = {window_loss, static_cast<double>(window_steps)};
      context_.communicator().allreduce(sums, 2, elastic::ElementType::kFloat64, elastic::ReduceOp::kSum);
      const double elapsed = std::chrono::duration<double>(Clock::now() - window_start).count();
      Logs logs{{"loss", sums[0] / std::max(1.0, sums[1])},
                {"learning_rate", lr},
                {"epoch", state_.epoch},
                {"step", static_cast<double>(state_.global_step)},
                {"samples_per_second", elapsed > 0 ? window_steps * global_batch / elapsed : 0.0}};
      nlohmann::json entry(logs);
      state_.log_history.push_back(entry);
      const double per_step = std::chrono::duration<double>(Clock::now() - start).count() / steps_run;
      log->info("step {}/{} | loss {:.6f} | lr {:.3e} | {:.1f} samples/s | epoch {:.2f} | ETA {}",
                state_.global_step, max_steps, logs["loss"], lr, logs["samples_per_second"], state_.epoch,
                format_duration(per_step * (max_steps - state_.global_step)));
      notify([&](TrainerCallback& cb) { cb.on_log(args_, state_, control_, logs); });
      window_loss = 0.0;
      window_steps = 0;
      window_start = Clock::now();
      control_.should_log = false;
    }
    if ((args_.save_steps > 0 && state_.global_step % args_.save_steps == 0) || control_.should_save) {
      save(checkpointer, *optimizer, steps_per_epoch);
      last_saved = state_.global_step;
      control_.should_save = false;
    }
    if (state_.global_step % steps_per_epoch == 0) notify([&](TrainerCallback& cb) { cb.on_epoch_end(args_, state_, control_); });

    // Every rank learns of a preemption signal at the same step (one small allreduce), so all
    // of them stop here together and save one consistent checkpoint (DESIGN.md decision 7).
    if (preemption) {
      std::int64_t requested = preemption->requested();
      context_.communicator().allreduce(&requested, 1, elastic::ElementType::kInt64, elastic::ReduceOp::kMax);
      if (requested != 0) {
        preempt_signal = static_cast<int>(requested);
        break;
      }
    }
  }
  if (last_saved != state_.global_step) {
    save(checkpointer, *optimizer, steps_per_epoch);
  }
  // The last save must be known to be committed before train() returns: nothing is lost.
  if (auto last = checkpointer.wait()) report_save(*last, /*must_succeed=*/true);
  if (preempt_signal != 0) {
    log->warn("preempted by {} at step {}: every rank stopped here and the checkpoint is saved; exit {} "
              "to be requeued, and the job resumes from this step",
              preempt_signal == SIGUSR1 ? "SIGUSR1" : preempt_signal == SIGTERM ? "SIGTERM" : "a signal",
              state_.global_step, kExitPreempted);
    notify([&](TrainerCallback& cb) { cb.on_preempt(args_, state_, control_, preempt_signal); });
  }
  notify([&](TrainerCallback& cb) { cb.on_train_end(args_, state_, control_); });

  TrainOutput out;
  out.global_step = state_.global_step;
  out.training_loss = steps_run > 0 ? total_loss / static_cast<double>(steps_run) : 0.0;
  out.train_runtime_s = std::chrono::duration<double>(Clock::now() - start).count();
  out.train_samples_per_second = out.train_runtime_s > 0 ? steps_run * global_batch / out.train_runtime_s : 0.0;
  out.resumed_from_step = state_.resumed_from_step;
  out.preempted = preempt_signal != 0;
  out.preempt_signal = preempt_signal;
  log->info("training finished at step {} ({:.1f} s, {:.1f} samples/s)", out.global_step, out.train_runtime_s,
            out.train_samples_per_second);
  return out;
}

}  // namespace tenax::sdk
