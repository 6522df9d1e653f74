#include "tenax/sdk/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <limits>
#include <optional>
#include <utility>

#include <torch/cuda.h>
#include <torch/torch.h>

#include "tenax/core/blas_kernels.h"
#include "tenax/core/build_info.h"
#include "tenax/core/error.h"
#include "tenax/core/exit_codes.h"
#include "tenax/core/logging.h"
#include "commit_protocol.h"
#include "fused_adamw.h"
#include "peer_heal.h"
#include "argument_changes.h"
#include "tenax/sdk/autocast.h"
#include "tenax/sdk/callbacks/default_callbacks.h"
#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/determinism.h"
#include "tenax/sdk/grad_sync.h"
#include "training_device.h"
#include "tenax/sdk/optimizer_groups.h"
#include "tenax/sdk/preemption.h"
#include "tenax/sdk/sampler.h"
#include "run_plan.h"
#include "step_flow.h"
#include "user_state_mirror.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"

namespace tenax::sdk {
namespace {

GradSyncOptions grad_sync_options(const TrainingArguments& args) {
  GradSyncOptions options;
  options.bucket_cap_bytes = static_cast<std::size_t>(args.ddp_bucket_cap_mb) << 20;
  options.overlap = args.ddp_overlap_backward;
  return options;
}

using Clock = std::chrono::steady_clock;

// How long a survivor waits for the agent to declare the next generation and for its peers
// (a warm spare at once, a fresh process after it has loaded libtorch) to connect.
constexpr std::chrono::seconds kRejoinTimeout{120};
// The fields of GradSync's step flag: a preemption signal's number, and a regroup request.
constexpr int kSignalFlags = 0xFF;
constexpr int kRegroupFlag = 1 << 8;

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

std::string format_duration(double seconds) {
  const auto s = static_cast<long long>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

// The per-rank seed of a fresh run; also how a rank with no saved RNG state derives one:
// a fixed function of (seed, rank, step), documented in docs/checkpoints.md ("Resume semantics").
std::uint64_t derived_seed(std::uint64_t seed, int rank, std::int64_t step) {
  return seed + 1000003ull * static_cast<std::uint64_t>(rank) + 7919ull * static_cast<std::uint64_t>(step);
}

// What the newest committed checkpoint whose manifest opens recorded (the manifest only: no
// shard is read): the run's global batch and arguments, checked before anything is loaded.
struct SavedRun {
  std::string dir;
  std::optional<std::int64_t> global_batch;
  nlohmann::json arguments;
};

// The checkpoint's "sampler" tensor, int64 [seed, epoch, cursor, global_batch]: the data order
// with its position, so that a resume can refuse a run whose data order would differ. Named
// fields here, the tensor only at the checkpoint boundary (its layout is the file format).
struct SavedDataOrder {
  std::uint64_t seed = 0;
  SamplerPosition position;
  std::int64_t global_batch = 0;

  torch::Tensor to_tensor() const {
    return torch::tensor({static_cast<std::int64_t>(seed), position.epoch, position.cursor, global_batch}, torch::kInt64);
  }
  /// nullopt when the tensor is absent or not four int64 values.
  static std::optional<SavedDataOrder> from_tensor(const torch::Tensor& t) {
    if (!t.defined() || t.scalar_type() != torch::kInt64 || t.numel() != 4) return std::nullopt;
    const torch::Tensor v = t.contiguous();
    const std::int64_t* p = v.data_ptr<std::int64_t>();
    return SavedDataOrder{static_cast<std::uint64_t>(p[0]), {p[1], p[2]}, p[3]};
  }
};

std::optional<SavedRun> newest_saved_run(const Checkpointer& checkpointer) {
  storage::CheckpointDirectory directory(checkpointer.root());
  const auto steps = directory.committed_steps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    auto reader = storage::CheckpointReader::open(directory.step_dir(*it));
    if (!reader.is_ok()) continue;
    SavedRun run;
    run.dir = directory.step_dir(*it).string();
    const nlohmann::json& state = reader.value().manifest().trainer_state;
    if (state.contains("train_batch_size") && state["train_batch_size"].is_number_integer()) {
      run.global_batch = state["train_batch_size"].get<std::int64_t>();
    }
    run.arguments = reader.value().manifest().arguments;
    return run;
  }
  return std::nullopt;
}

// A resume with arguments that would make it another run is refused before anything is
// loaded (argument_changes.h says which); the harmless changes are logged.
void check_resumed_arguments(const nlohmann::json& recorded, const TrainingArguments& args, const std::string& dir) {
  const std::vector<ArgumentChange> changes = diff_arguments(recorded, args);
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  for (const ArgumentChange& change : changes) {
    if (change.kind == ArgumentChangeKind::kHarmless) log->info("resuming with a changed argument: {}", describe(change));
  }
  if (has_breaking(changes)) throw ConfigError(breaking_changes_message(changes, dir));
}

}  // namespace

struct Trainer::Run {
  Run(const std::string& output_dir, elastic::WorkerContext& context, const CheckpointerOptions& options)
      : checkpointer_options(options), checkpointer(std::make_unique<Checkpointer>(output_dir, context, options)) {}
  CheckpointerOptions checkpointer_options;
  // Replaced when the process rejoins a new generation (its commits go through that generation).
  std::unique_ptr<Checkpointer> checkpointer;
  detail::RunPlan plan;
  std::unique_ptr<torch::optim::AdamW> optimizer;
  std::optional<LrSchedule> schedule;
  std::vector<torch::Tensor> params;
  std::optional<GradSync> grad_sync;
  std::optional<ResumableSampler> sampler;  // none when the caller supplies the batches
  std::optional<PreemptionSignals> preemption;
  Clock::time_point start;
  Clock::time_point window_start;
  double window_loss = 0.0;
  double total_loss = 0.0;
  std::int64_t window_steps = 0;
  std::int64_t steps_run = 0;
  std::int64_t last_saved = -1;  ///< the optimizer step of the last save
  nlohmann::json arguments;      ///< args_ as every checkpoint records them (fixed for the run)
  bool ended = false;
  /// False only in a replacement until it has healed: it has no training state to offer.
  bool holds_state = true;
  /// train() under `tenax run --recovery in-process`: RNG mirrored every step, losses healed.
  bool heals_in_process = false;
  /// With enable_step_recovery() and user state: every rank's registered state at the last step.
  std::optional<detail::UserStateMirror> user_mirror;
  /// The preemption signal the ranks agreed on in the last step's gradient allreduce; read (and
  /// cleared) by the next preemption_agreed(), which then needs no collective of its own.
  std::optional<int> preemption_from_step;
};

Trainer::Trainer(std::shared_ptr<Model> model, TrainingArguments args,
                 std::shared_ptr<const Dataset> train_dataset, elastic::WorkerContext& context,
                 Collator collator)
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
  torch::Tensor loss;
  {
    // The parameters' device decides which autocast applies (CPU or CUDA).
    AutocastGuard autocast(model.parameters().front().device().type(), args_.bf16);
    loss = compute_loss(model, batch);
  }
  // Divided only when accumulating: with one micro-batch the arithmetic stays exactly what it
  // was (bit-exact resume compares against runs without accumulation too).
  if (accumulation_steps_ > 1) loss = loss / static_cast<double>(accumulation_steps_);
  loss.backward();
  return loss.detach();
}

std::unique_ptr<torch::optim::AdamW> Trainer::create_optimizer() {
  // transformers' two groups: weight decay for all but biases and LayerNorm parameters.
  torch::optim::AdamWOptions options(args_.learning_rate);
  options.betas({args_.adam_beta1, args_.adam_beta2}).eps(args_.adam_epsilon).weight_decay(args_.weight_decay);
  return std::make_unique<detail::FusedAdamW>(adamw_param_groups(*model_, options), options);
}

LrSchedule Trainer::create_scheduler(std::int64_t num_training_steps) {
  const auto& kwargs = args_.lr_scheduler_kwargs;
  return LrSchedule(LrScheduleOptions(parse_lr_scheduler_type(args_.lr_scheduler_type),
                                      args_.resolved_warmup_steps(num_training_steps), num_training_steps)
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

Batch Trainer::load_batch(const std::vector<std::int64_t>& indices) const {
  std::vector<Example> examples;
  examples.reserve(indices.size());
  for (std::int64_t i : indices) examples.push_back(train_dataset_->get(i));
  return collator_(examples);
}

std::optional<std::int64_t> Trainer::restore(Checkpointer& checkpointer, torch::optim::AdamW& optimizer) {
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
  if (!loaded) return std::nullopt;
  check_resumed_arguments(loaded->arguments, args_, loaded->dir.string());  // an older one may have loaded

  // The data position first: a changed seed or global batch would silently change which
  // samples come next, so both are refused (the run stops) before the optimizer, the RNG and
  // the step are touched; the parameters were already read in place.
  const std::optional<SavedDataOrder> order = SavedDataOrder::from_tensor(loaded->get("sampler"));
  if (!order) throw StorageError(loaded->dir.string() + ": the sampler position is missing or malformed");
  const std::uint64_t saved_seed = order->seed;
  const std::int64_t saved_global_batch = order->global_batch;
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
  restored_position_ = order->position;

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
    // A rank the writing world did not have: a deterministic stream of its own (docs/checkpoints.md, "Resume semantics").
    torch::manual_seed(derived_seed(args_.seed, rank, loaded->step));
    logger("tenax.trainer")->warn("checkpoint has no RNG state for rank {} (it was written by {} ranks); "
                                  "derived one from (seed, rank, step)", rank, loaded->world_size);
  }
  // The checkpoint is named by its label: the optimizer step for train(), the solver's step for
  // an embedding code; the optimizer step itself is in the saved TrainerState.
  const nlohmann::json& saved_state = loaded->trainer_state;
  state_.global_step = saved_state.contains("global_step") && saved_state["global_step"].is_number_integer()
                           ? saved_state["global_step"].get<std::int64_t>()
                           : loaded->step;
  state_.resumed_from_step = state_.global_step;
  if (saved_state.contains("log_history") && saved_state["log_history"].is_array()) {
    state_.log_history = saved_state["log_history"].get<std::vector<nlohmann::json>>();
  }
  if (saved_state.contains("best_metric") && saved_state["best_metric"].is_number()) {
    state_.best_metric = saved_state["best_metric"].get<double>();
  }
  if (saved_state.contains("best_model_checkpoint") && saved_state["best_model_checkpoint"].is_string()) {
    state_.best_model_checkpoint = saved_state["best_model_checkpoint"].get<std::string>();
  }
  log->info("resumed from {} at step {} (generation {}, restart {}{})", loaded->dir.string(), loaded->step,
            context_.generation(), context_.restart_count(),
            loaded->world_size != context_.world_size()
                ? ", resharded from " + std::to_string(loaded->world_size) + " to " +
                      std::to_string(context_.world_size()) + " ranks"
                : std::string());
  notify([&](TrainerCallback& cb) { cb.on_load(args_, state_, control_, loaded->dir.string()); });
  return loaded->step;
}

void Trainer::save(const Logs& metrics, std::optional<std::int64_t> label) {
  Run& r = *run_;
  Checkpointer& checkpointer = *r.checkpointer;
  torch::optim::AdamW& optimizer = *r.optimizer;
  const std::int64_t steps_per_epoch = r.plan.steps_per_epoch;
  const int rank = context_.rank();
  SaveRequest request;
  request.step = label.value_or(state_.global_step);
  const std::int64_t data_step = state_.global_step + skipped_steps_;
  request.epoch = data_step / steps_per_epoch;
  request.metrics = metrics;
  // As transformers' _save_checkpoint: a better metric makes this checkpoint the best one,
  // recorded in the state it saves. (Retention and load_best_model_at_end look at the
  // committed manifests instead, so a save that then fails is never taken for the best.)
  if (const std::string key = best_metric_key(); !key.empty()) {
    if (const auto it = metrics.find(key); it != metrics.end()) {
      const bool better = !state_.best_metric ||
                          (args_.resolved_greater_is_better() ? it->second > *state_.best_metric
                                                               : it->second < *state_.best_metric);
      if (better) {
        state_.best_metric = it->second;
        state_.best_model_checkpoint = storage::CheckpointDirectory(checkpointer.root()).step_dir(request.step).string();
      }
    }
  }
  // Parameters and optimizer state change only in optimizer.step(), which waits for the
  // snapshot (train()): the writer copies them late, overlapping the next step's compute.
  // Everything else (sampler, RNG, user state, which callbacks may change) is copied now.
  const NamedTensors params = named_parameters();
  NamedTensors& late = args_.save_async ? request.replicated_copied_late : request.replicated;
  for (const auto& [name, p] : params) late.emplace_back("model/" + name, p.detach());
  for (auto& entry : capture_adamw_state(optimizer, params, Capture::kView)) late.push_back(std::move(entry));
  const SavedDataOrder order{args_.seed, {request.epoch, (data_step % steps_per_epoch) * state_.train_batch_size},
                             state_.train_batch_size};
  request.replicated.emplace_back("sampler", order.to_tensor());
  request.per_rank = capture_rng_states(rank);
  if (user_state_ != nullptr) user_state_->capture(rank, request.replicated, request.per_rank);
  request.trainer_state = state_.to_json();
  request.arguments = r.arguments;

  r.last_saved = state_.global_step;
  std::optional<SaveResult> previous = checkpointer.save_async(std::move(request));
  if (previous) report_save(*previous, /*must_succeed=*/args_.on_save_error == "stop");
  if (!args_.save_async) {
    if (auto done = checkpointer.wait()) report_save(*done, args_.on_save_error == "stop");
  }
}

std::string Trainer::best_metric_key() const {
  const std::string& m = args_.metric_for_best_model;
  if (m.empty()) return m;
  return starts_with(m, "eval_") ? m : "eval_" + m;
}

void Trainer::load_parameters_from(const std::filesystem::path& dir) {
  auto reader = storage::CheckpointReader::open(dir);
  if (!reader.is_ok()) throw StorageError("cannot load the best model: " + reader.status().to_string());
  const storage::Manifest& manifest = reader.value().manifest();
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : named_parameters()) {
    const std::string key = "model/" + name;
    const auto entry = manifest.tensors.find(key);
    if (entry == manifest.tensors.end() || !param.sizes().equals(entry->second.shape) ||
        param.scalar_type() != torch::kFloat32 || !param.is_contiguous()) {
      throw StorageError(dir.string() + ": parameter '" + name + "' is missing or does not match the model");
    }
    // Straight into a host parameter; through a host buffer into a device one.
    torch::Tensor destination = param.device().is_cpu() ? param.detach() : torch::empty_like(param, torch::kCPU);
    const Status read = reader.value().read_into(key, destination.data_ptr(), destination.nbytes());
    if (!read.is_ok()) throw StorageError(read.to_string());
    if (!param.device().is_cpu()) param.copy_(destination);
  }
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
  state_.log_history.push_back(nlohmann::json(logs));
  // The progress bar (default) shows the same; the log line is for runs without it.
  logger("tenax.trainer", LogPolicy::kRankZeroOnly)
      ->log(args_.disable_tqdm ? spdlog::level::info : spdlog::level::debug,
             "step {}/{} | loss {:.6f} | lr {:.3e} | {:.1f} samples/s | epoch {:.2f} | ETA {}", state_.global_step,
             state_.max_steps, logs["loss"], lr, logs["samples_per_second"], state_.epoch, format_duration(eta_seconds));
  notify([&](TrainerCallback& cb) { cb.on_log(args_, state_, control_, logs); });
}

void Trainer::report_save(const SaveResult& result, bool must_succeed) {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  // The peer this rank waited on is gone and a newer generation is declared, or (across nodes)
  // the rendezvous formed a newer one while this rank trained on: the training loop recovers in
  // process (Trainer::train), and the healed generation takes the save again.
  if (result.superseded || (result.fenced && run_ && run_->heals_in_process)) throw PeerLostError(result.error);
  if (result.committed) {
    log->info("saved checkpoint {} (step stalled {:.3f} s for the snapshot; write + commit {:.3f} s)",
              result.dir.string(), result.snapshot_seconds, result.write_seconds);
    notify([&](TrainerCallback& cb) { cb.on_save(args_, state_, control_, result.dir.string()); });
    return;
  }
  logger("tenax.trainer")->error("checkpoint of step {} failed: {}", result.step, result.error);
  notify([&](TrainerCallback& cb) { cb.on_save_error(args_, state_, control_, result.error); });
  // Whatever on_save_error says: a newer generation formed without this process, so the steps it
  // trains can never be saved. It ends (not with exit 3: nothing was saved to resume from, and
  // this is no preemption) so that its agent re-joins the current generation.
  if (result.fenced) {
    throw RendezvousError(result.error + "; stopping this worker so that its agent re-joins the current generation");
  }
  if (must_succeed) throw StorageError(result.error);
  log->warn("training goes on (on_save_error = continue); the previous checkpoint is intact");
}

Trainer::Run& Trainer::run(const char* call) {
  if (!run_) throw std::logic_error(std::string("Trainer::") + call + " before Trainer::begin()");
  return *run_;
}

TrainOutput Trainer::train() {
  if (!train_dataset_) {
    throw ConfigError("Trainer::train() needs a training dataset; without one, call begin() and step() with "
                      "your own batches");
  }
  begin(/*resume=*/true);
  Run& r = *run_;
  int preempt_signal = 0;
  while (state_.global_step < r.plan.max_steps && state_.global_step + skipped_steps_ < r.plan.data_step_limit &&
         !control_.should_training_stop) {
    // This rank's slice of the global batch, in micro-batches of per_device samples.
    const std::int64_t data_step = state_.global_step + skipped_steps_;
    if (data_step % r.plan.steps_per_epoch == 0) {
      notify([&](TrainerCallback& cb) { cb.on_epoch_begin(args_, state_, control_); });
    }
    const std::vector<std::int64_t> indices = r.sampler->rank_indices(data_step, context_.rank(), context_.world_size());
    std::vector<Batch> micro_batches;
    micro_batches.reserve(static_cast<std::size_t>(accumulation_steps_));
    for (std::int64_t micro = 0; micro < accumulation_steps_; ++micro) {
      const auto first = indices.begin() + micro * args_.per_device_train_batch_size;
      micro_batches.push_back(load_batch({first, first + args_.per_device_train_batch_size}));
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
  return end(preempt_signal);
}

std::optional<std::int64_t> Trainer::begin(bool resume) {
  if (run_) throw std::logic_error("Trainer::begin() called twice");
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  const int rank = context_.rank();
  const int world = context_.world_size();
  if (args_.eval_strategy != "no" && !eval_dataset_) {
    throw ConfigError("TrainingArguments.eval_strategy: '" + args_.eval_strategy +
                      "' needs an evaluation dataset; call Trainer::set_eval_dataset() or set eval_strategy = \"no\"");
  }
  if (args_.full_determinism) enable_full_determinism();
  CheckpointerOptions checkpoint_options;
  checkpoint_options.save_total_limit = static_cast<int>(args_.save_total_limit);
  checkpoint_options.metric_for_best_model = best_metric_key();
  checkpoint_options.greater_is_better = args_.resolved_greater_is_better();
  run_ = std::make_unique<Run>(args_.output_dir, context_, checkpoint_options);
  Run& r = *run_;

  const std::optional<SavedRun> saved_run = resume ? newest_saved_run(*r.checkpointer) : std::nullopt;
  if (saved_run) check_resumed_arguments(saved_run->arguments, args_, saved_run->dir);
  r.plan = detail::plan_run(args_, world,
                            train_dataset_ ? std::optional<std::int64_t>(train_dataset_->size()) : std::nullopt,
                            saved_run ? saved_run->global_batch : std::nullopt, args_.output_dir);
  if (r.plan.accumulation_changed_from) {
    log->warn("elastic resume: the checkpoint's global batch is {}; with {} ranks x {} per device, "
              "gradient_accumulation_steps becomes {} (was {}) so that it stays {}",
              r.plan.global_batch, world, args_.per_device_train_batch_size, r.plan.accumulation_steps,
              *r.plan.accumulation_changed_from, r.plan.global_batch);
  }
  accumulation_steps_ = r.plan.accumulation_steps;
  if (train_dataset_) r.sampler.emplace(train_dataset_->size(), r.plan.global_batch, args_.seed);
  state_.max_steps = r.plan.max_steps;
  state_.num_train_epochs = r.plan.num_train_epochs;
  state_.logging_steps = args_.logging_steps;
  state_.eval_steps = args_.resolved_eval_steps();
  state_.save_steps = args_.save_steps;
  state_.train_batch_size = r.plan.global_batch;

  r.arguments = args_.to_json();
  r.optimizer = create_optimizer();
  r.schedule.emplace(create_scheduler(r.plan.max_steps));
  r.params = model_->parameters();
  r.grad_sync.emplace(context_.communicator(), r.params, grad_sync_options(args_));
  notify([&](TrainerCallback& cb) { cb.on_init_end(args_, state_, control_); });

  // In-process recovery needs a loop that knows a step failed: train()'s, or that of a caller
  // that drives step() itself and said it handles RecoveredError (enable_step_recovery(); the C
  // API's tenax_enable_in_process_recovery). Any other such caller could not redo a step it was
  // not told failed: its run never offers to heal, says why, and the agent restarts it from disk.
  r.heals_in_process = context_.recovers_in_process() && (r.plan.has_dataset || step_recovery_);
  if (context_.recovers_in_process() && !r.heals_in_process) {
    log->warn("in-process recovery was asked for (`tenax run --recovery in-process`), but this program drives the "
              "steps itself and did not say it handles a healed step (Trainer::enable_step_recovery, "
              "tenax_enable_in_process_recovery): a lost peer restarts every worker from the newest checkpoint");
  }
  if (step_recovery_ && r.heals_in_process && user_state_ != nullptr && !user_state_->empty()) {
    r.user_mirror.emplace(*user_state_);
  }
  if (context_.identity().replacement) {
    // A warm spare or a fresh process in a lost rank's place: the job runs on, and this rank
    // takes its state from a peer's memory, not from disk (heal_from_peers).
    notify([&](TrainerCallback& cb) { cb.on_restart(args_, state_, control_); });
    r.holds_state = false;
    if (heal_until_healed(Clock::now(), /*rejoin_first=*/false)) {
      healed_at_begin_ = true;
      notify([&](TrainerCallback& cb) { cb.on_train_begin(args_, state_, control_); });
      progress_.report(state_.global_step);
      if (args_.handle_preemption_signals) r.preemption.emplace();
      r.start = r.window_start = Clock::now();
      return state_.global_step;
    }
    // No rank of this generation holds training state: every one is a replacement (across
    // nodes every worker starts as one, so in a job's first generation, or after every worker
    // was lost). They all start from the newest checkpoint, below, together.
    r.holds_state = true;
  }
  // Identical replicas first, then a per-rank random stream (dropout differs across ranks).
  r.grad_sync->broadcast_parameters(0);
  torch::manual_seed(derived_seed(args_.seed, rank, 0));
  if ((context_.generation() > 0 || context_.restart_count() > 0) && !context_.identity().replacement) {
    notify([&](TrainerCallback& cb) { cb.on_restart(args_, state_, control_); });
  }
  skipped_steps_ = 0;
  const std::optional<std::int64_t> restored = resume ? restore(*r.checkpointer, *r.optimizer) : std::nullopt;
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
    // should_epoch_stop skipped.
    const auto [epoch, cursor] = restored_position_;
    skipped_steps_ = epoch * r.plan.steps_per_epoch + cursor / r.plan.global_batch - state_.global_step;
    if (skipped_steps_ < 0) {
      throw StorageError("the checkpoint's data position (epoch " + std::to_string(epoch) + ", sample " +
                         std::to_string(cursor) + ") is behind its step " + std::to_string(state_.global_step));
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
    log->info("training one step per call on the caller's batches: {} ranks, gradient averaged over all of them", world);
  }
  if (args_.save_async && user_state_ != nullptr) {
    // The caller's arrays (a simulation's fields) are the one large thing a save copies
    // before it returns; their snapshot buffers are mapped now rather than inside the
    // caller's loop at the first save (Checkpointer::reserve_snapshot).
    r.checkpointer->reserve_snapshot(user_state_->tensors(context_.rank()));
  }
  notify([&](TrainerCallback& cb) { cb.on_train_begin(args_, state_, control_); });
  progress_.report(state_.global_step);
  if (args_.handle_preemption_signals) r.preemption.emplace();
  r.start = r.window_start = Clock::now();
  return restored;
}

double Trainer::step(const std::vector<Batch>& micro_batches) {
  Run& r = run("step()");
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
  throw RecoveredError("the step did not complete: a peer was lost and the job healed in process; every rank stands at "
                       "optimizer step " + std::to_string(*healed) +
                       ", the last one completed, with its registered state as it was when that step was called; go "
                       "on from there",
                       *healed);
}

std::optional<std::int64_t> Trainer::recover(const std::string& why) {
  if (!step_recovery_ || !recover_in_process(why)) return std::nullopt;
  // A preemption answer from a step whose later collective failed is this rank's alone: the next
  // preemption_agreed() must ask every rank (the replacement has no such answer).
  run_->preemption_from_step.reset();
  return state_.global_step;
}

double Trainer::take_step(const std::vector<Batch>& micro_batches) {
  Run& r = run("step()");
  if (static_cast<std::int64_t>(micro_batches.size()) != accumulation_steps_) {
    throw ConfigError("Trainer::step: got " + std::to_string(micro_batches.size()) +
                      " micro-batches, the run accumulates gradient_accumulation_steps = " +
                      std::to_string(accumulation_steps_) + " per optimizer step");
  }
  const std::int64_t step = state_.global_step;
  const std::int64_t data_step = step + skipped_steps_;  // which global batch of the data order
  notify([&](TrainerCallback& cb) { cb.on_step_begin(args_, state_, control_); });

  // Every rank's registered state as the caller hands it to this step; it becomes the point a heal
  // goes back to once the step's gradients are in (before the backward: GradSync may own the
  // communicator from prepare_for_backward() on).
  if (r.user_mirror) r.user_mirror->stage(context_.communicator());
  // Gradients accumulate locally over the micro-batches and are synchronised once, after the last.
  r.grad_sync->zero_grad();  // in place: gradients stay views into the buckets
  torch::Tensor loss;
  for (std::size_t micro = 0; micro < micro_batches.size(); ++micro) {
    // The last micro-batch's backward finishes the gradients: its buckets go out during it.
    if (micro + 1 == micro_batches.size()) r.grad_sync->prepare_for_backward();
    torch::Tensor micro_loss = training_step(*model_, batch_on(micro_batches[micro], device_));
    loss = micro == 0 ? micro_loss : loss + micro_loss;
    if (micro + 1 < micro_batches.size()) notify([&](TrainerCallback& cb) { cb.on_substep_end(args_, state_, control_); });
  }
  // With in-process recovery every rank's random state (after this step's dropout) rides in
  // the gradient allreduce: whoever completes the step holds what a replacement continues from.
  // So does the preemption flag: every rank learns of a signal in the step's own collective.
  // So is a regroup: the agent declared a newer generation that no failed collective of this
  // one told this rank about (GradSync's flag fields: a signal's number, then this request).
  r.preemption_from_step.reset();
  const int request = (r.preemption ? r.preemption->requested() : 0) |
                      (r.heals_in_process && context_.generation_superseded() ? kRegroupFlag : 0);
  const int agreed =
      r.grad_sync->synchronize(r.heals_in_process ? capture_cpu_rng_state() : torch::Tensor(), request);
  if (r.preemption) r.preemption_from_step = agreed & kSignalFlags;
  if (args_.max_grad_norm > 0) torch::nn::utils::clip_grad_norm_(r.params, args_.max_grad_norm);
  const double lr = args_.learning_rate * r.schedule->multiplier(step);
  for (auto& group : r.optimizer->param_groups()) group.options().set_lr(lr);
  // An async save copies the parameters and the optimizer state while this step's forward
  // and backward ran; the update must not change them before that copy is done.
  r.checkpointer->wait_for_snapshot();
  r.optimizer->step();

  const double loss_value = loss.item<double>();
  r.window_loss += loss_value;
  r.total_loss += loss_value;
  ++r.window_steps;
  ++r.steps_run;
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
    state_.epoch = static_cast<double>(state_.global_step + skipped_steps_) / static_cast<double>(r.plan.steps_per_epoch);
    epoch_end = true;
    if (r.plan.logging == detail::IntervalStrategy::kEpoch) control_.should_log = true;
    if (r.plan.eval == detail::IntervalStrategy::kEpoch) control_.should_evaluate = true;
    if (r.plan.save == detail::IntervalStrategy::kEpoch) control_.should_save = true;
  }
  control_.should_epoch_stop = false;
  if (epoch_end) notify([&](TrainerCallback& cb) { cb.on_epoch_end(args_, state_, control_); });
  act_on_control(lr);
  if ((agreed & kRegroupFlag) != 0) {
    // Every rank completed this step and agreed in its collective: they leave together, so the
    // next generation heals with nothing to redo.
    logger("tenax.trainer", LogPolicy::kRankZeroOnly)
        ->warn("the agents declared a generation after {} while it ran; every rank leaves it after step {} and "
               "regroups",
               context_.generation(), state_.global_step);
    heal_until_healed(Clock::now(), /*rejoin_first=*/true);
  }
  return loss_value;
}

bool Trainer::recover_in_process(const std::string& why) {
  if (!run_ || !run_->heals_in_process) return false;
  const auto noticed = Clock::now();
  logger("tenax.trainer")
      ->warn("generation {} lost a peer during step {} ({}); recovering in process: this process keeps its state "
             "and joins the next generation",
             context_.generation(), state_.global_step + 1, why);
  heal_until_healed(noticed, /*rejoin_first=*/true);
  return true;
}

bool Trainer::heal_until_healed(Clock::time_point since, bool rejoin_first) {
  Run& r = *run_;
  for (bool rejoin = rejoin_first;; rejoin = true) {
    if (rejoin) {
      // The communicator goes first, so that peers still blocked on this rank fail now; a
      // TimeoutError here (no agent declared a generation) ends the process. A save in flight
      // belonged to the lost generation and can never commit: it is cancelled, and its
      // uncommitted directory removed by rank 0 of the new generation (Checkpointer).
      context_.rejoin(kRejoinTimeout);
      r.checkpointer.reset();
      r.checkpointer = std::make_unique<Checkpointer>(args_.output_dir, context_, r.checkpointer_options);
      // The new communicator's GradSync keeps the mirrored RNG states of the last completed step.
      const torch::Tensor mirrors = r.grad_sync->mirrors();
      r.grad_sync.emplace(context_.communicator(), r.params, grad_sync_options(args_));
      r.grad_sync->set_mirrors(mirrors);
    }
    try {
      const bool healed = heal_from_peers(since);
      // The registered state of the step the job healed to, on every rank (the survivors too).
      if (healed && r.user_mirror) r.user_mirror->heal(context_.communicator(), state_.global_step);
      return healed;
    } catch (const PeerLostError& e) {
      logger("tenax.trainer")->warn("generation {} lost a peer while it healed ({}); joining the next one",
                                    context_.generation(), e.what());
    } catch (const TimeoutError& e) {
      logger("tenax.trainer")->warn("generation {} timed out while it healed ({}); joining the next one",
                                    context_.generation(), e.what());
    }
  }
}

bool Trainer::heal_from_peers(Clock::time_point since) {
  Run& r = *run_;
  elastic::Communicator& comm = context_.communicator();
  const int rank = context_.rank();
  const std::vector<detail::HealStatus> statuses =
      detail::exchange_heal_status(comm, {r.holds_state ? state_.global_step : -1});
  const std::optional<detail::HealPlan> plan = detail::plan_heal(statuses);
  if (!plan) {
    // Every rank sees the same statuses: they all say so, and begin() starts them from disk.
    logger("tenax.trainer", LogPolicy::kRankZeroOnly)
        ->warn("generation {}: no rank holds training state to heal from (every rank is a replacement); starting "
               "from the newest checkpoint",
               context_.generation());
    return false;
  }
  const NamedTensors params = named_parameters();
  NamedTensors outgoing;
  std::int64_t last_committed = -1;
  if (rank == plan->source) {
    for (const auto& [name, p] : params) outgoing.emplace_back("model/" + name, p.detach());
    for (auto& entry : capture_adamw_state(*r.optimizer, params, Capture::kView)) outgoing.push_back(std::move(entry));
    outgoing.emplace_back("rng/mirrors", r.grad_sync->mirrors());
    nlohmann::json progress = state_.to_json();
    progress["skipped_steps"] = skipped_steps_;
    // What is on disk, not what was started: a save in flight when the peer was lost never
    // committed.
    const std::optional<std::int64_t> committed =
        storage::CheckpointDirectory(r.checkpointer->root()).latest_step();
    last_committed = committed ? *committed : -1;
    progress["last_committed"] = last_committed;
    const std::string text = progress.dump();
    outgoing.emplace_back("trainer/state",
                          torch::from_blob(const_cast<char*>(text.data()), {static_cast<std::int64_t>(text.size())},
                                           torch::kUInt8)
                              .clone());
  }
  std::map<std::string, torch::Tensor> param_by_key;
  for (const auto& [name, param] : params) param_by_key.emplace("model/" + name, param.detach());
  torch::NoGradGuard no_grad;
  const NamedTensors received = detail::broadcast_named_tensors(
      comm, plan->source, outgoing, [&](const std::string& name, torch::ScalarType, c10::IntArrayRef) {
        const auto it = param_by_key.find(name);
        return it == param_by_key.end() ? torch::Tensor() : it->second;
      });
  std::int64_t global_batch = r.plan.global_batch;
  if (rank != plan->source) {
    std::map<std::string, torch::Tensor> by_name(received.begin(), received.end());
    auto lookup = [&](const std::string& n) {
      const auto it = by_name.find(n);
      return it == by_name.end() ? torch::Tensor() : it->second;
    };
    restore_adamw_state(*r.optimizer, params, lookup);
    r.grad_sync->set_mirrors(lookup("rng/mirrors"));
    const torch::Tensor text = lookup("trainer/state");
    const auto progress = nlohmann::json::parse(
        std::string(reinterpret_cast<const char*>(text.data_ptr<std::uint8_t>()), static_cast<std::size_t>(text.numel())));
    state_.global_step = progress.at("global_step").get<std::int64_t>();
    state_.epoch = progress.at("epoch").get<double>();
    if (progress.contains("log_history")) state_.log_history = progress["log_history"].get<std::vector<nlohmann::json>>();
    if (progress.contains("best_metric") && progress["best_metric"].is_number()) {
      state_.best_metric = progress["best_metric"].get<double>();
    }
    if (progress.contains("best_model_checkpoint") && progress["best_model_checkpoint"].is_string()) {
      state_.best_model_checkpoint = progress["best_model_checkpoint"].get<std::string>();
    }
    skipped_steps_ = progress.at("skipped_steps").get<std::int64_t>();
    last_committed = progress.at("last_committed").get<std::int64_t>();
    global_batch = progress.at("train_batch_size").get<std::int64_t>();
  }
  adapt_to_world(global_batch);
  // Every rank, the source too, continues the random stream of its rank number from where the
  // healed step left it: that row of the mirrors that travelled with that step's gradients.
  // The rank number, not the process, owns the stream, as it owns the slice of each global
  // batch: a renumbered world stays bit-identical, and a shrunk one keeps the first rows.
  const torch::Tensor mirrors = r.grad_sync->mirrors();
  if (!mirrors.defined() || mirrors.size(0) < context_.world_size()) {
    throw RendezvousError("healing generation " + std::to_string(context_.generation()) + ": rank " +
                          std::to_string(plan->source) + " holds no mirrored RNG state for " +
                          std::to_string(context_.world_size()) + " ranks");
  }
  restore_cpu_rng_state(mirrors[rank].clone());
  r.grad_sync->set_mirrors(mirrors.narrow(0, 0, context_.world_size()).clone());
  r.grad_sync->zero_grad();
  r.holds_state = true;
  r.last_saved = last_committed;
  // Flags raised for the step in flight were raised on some ranks only (the loss may have
  // come between a step's log and its save): every rank starts the healed step from none.
  control_ = TrainerControl{};
  state_.generation = context_.generation();
  context_.announce_in_process_recovery();
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - since).count();
  logger("tenax.trainer", LogPolicy::kRankZeroOnly)
      ->warn("healed from rank {} in {:.0f} ms: generation {} goes on at step {}, 0 steps lost (the step in flight is "
             "redone)",
             plan->source, ms, context_.generation(), state_.global_step);
  // The step the job goes on from may have been due a save that the loss cut short: it is
  // taken now, by every rank, so that no scheduled checkpoint goes missing.
  if (r.plan.has_dataset && state_.global_step > 0 && last_committed < state_.global_step) {
    const detail::StepFlow flow = detail::flow_after_step(r.plan, args_.logging_steps, args_.save_steps,
                                                          state_.global_step, state_.global_step - 1 + skipped_steps_);
    if (flow.save) save({});
  }
  return true;
}

void Trainer::adapt_to_world(std::int64_t global_batch) {
  Run& r = *run_;
  const int world = context_.world_size();
  state_.rank = context_.rank();
  if (world == state_.world_size && global_batch == r.plan.global_batch) return;
  const int was_world = state_.world_size;
  const std::int64_t was_accumulation = accumulation_steps_;
  // DESIGN.md decision 4: the global batch stays; gradient accumulation makes up for the ranks
  // that are gone. The data order and the schedule are functions of the step: they go on.
  // A world that cannot divide the global batch is refused here (ConfigError, exit 2).
  r.plan = detail::plan_run(args_, world,
                            train_dataset_ ? std::optional<std::int64_t>(train_dataset_->size()) : std::nullopt,
                            global_batch, args_.output_dir);
  accumulation_steps_ = r.plan.accumulation_steps;
  if (r.sampler && r.plan.global_batch != r.sampler->global_batch()) {
    r.sampler.emplace(train_dataset_->size(), r.plan.global_batch, args_.seed);
  }
  state_.world_size = world;
  state_.train_batch_size = r.plan.global_batch;
  logger("tenax.trainer", LogPolicy::kRankZeroOnly)
      ->warn("the world is {} ranks now (was {}): {} per device x {} accumulation (was {}) keeps the global batch {}",
             world, was_world, args_.per_device_train_batch_size, accumulation_steps_, was_accumulation,
             r.plan.global_batch);
}

void Trainer::act_on_control(double lr) {
  Run& r = *run_;
  // Log, evaluate, save: in transformers' order, so a save carries this step's evaluation.
  if (control_.should_log) {
    control_.should_log = false;
    const double per_step = std::chrono::duration<double>(Clock::now() - r.start).count() / std::max<std::int64_t>(1, r.steps_run);
    const double remaining = r.plan.has_dataset ? static_cast<double>(r.plan.max_steps - state_.global_step) : 0.0;
    log_training(r.window_loss, r.window_steps, lr,
                 std::chrono::duration<double>(Clock::now() - r.window_start).count(), per_step * remaining);
    r.window_loss = 0.0;
    r.window_steps = 0;
    r.window_start = Clock::now();
  }
  Logs eval_metrics;
  if (control_.should_evaluate) {
    control_.should_evaluate = false;
    if (!eval_dataset_) {
      throw ConfigError("a callback asked for an evaluation (TrainerControl.should_evaluate) but there is no "
                        "evaluation dataset; call Trainer::set_eval_dataset()");
    }
    eval_metrics = evaluate(*eval_dataset_, compute_metrics_);
    r.window_start = Clock::now();  // samples/s counts training only
  }
  if (control_.should_save) {
    control_.should_save = false;
    save(eval_metrics);
  }
}

int Trainer::preemption_agreed() {
  Run& r = run("preemption_agreed()");
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

void Trainer::save_checkpoint(std::optional<std::int64_t> label) {
  run("save_checkpoint()");
  save({}, label);
}

void Trainer::wait_for_checkpoint() {
  Run& r = run("wait_for_checkpoint()");
  if (auto done = r.checkpointer->wait()) report_save(*done, /*must_succeed=*/true);
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
  Run& r = run("end()");
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
    }
  }
  if (preempt_signal != 0) {
    log->warn("preempted by {} at step {}: every rank stopped here and the checkpoint is saved; exit {} "
              "to be requeued, and the job resumes from this step",
              preempt_signal == SIGUSR1 ? "SIGUSR1" : preempt_signal == SIGTERM ? "SIGTERM" : "a signal",
              state_.global_step, kExitPreempted);
    notify([&](TrainerCallback& cb) { cb.on_preempt(args_, state_, control_, preempt_signal); });
  }
  notify([&](TrainerCallback& cb) { cb.on_train_end(args_, state_, control_); });
  progress_.finish();  // what follows (evaluation, teardown) is not judged as training

  TrainOutput out;
  out.global_step = state_.global_step;
  out.training_loss = r.steps_run > 0 ? r.total_loss / static_cast<double>(r.steps_run) : 0.0;
  out.train_runtime_s = std::chrono::duration<double>(Clock::now() - r.start).count();
  out.train_samples_per_second =
      out.train_runtime_s > 0 ? r.steps_run * r.plan.global_batch / out.train_runtime_s : 0.0;
  out.resumed_from_step = state_.resumed_from_step;
  out.preempted = preempt_signal != 0;
  out.preempt_signal = preempt_signal;
  log->info("training finished at step {} ({:.1f} s, {:.1f} samples/s)", out.global_step, out.train_runtime_s,
            out.train_samples_per_second);
  return out;
}

}  // namespace tenax::sdk
