// Trainer and its checkpoints: a save (a TrainingSnapshot handed to the Checkpointer), what a
// save's outcome means for the run (report_save), a resume (restore) and the best model at the
// end; kept apart from the training loop in trainer.cpp.
#include <utility>

#include <fmt/format.h>
#include <torch/torch.h>

#include "training_run.h"
#include "training_snapshot.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/trainer.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"

namespace tenax::sdk {

void Trainer::save(const Logs& metrics, std::optional<std::int64_t> label) {
  detail::TrainingRun& r = *run_;
  Checkpointer& checkpointer = *r.checkpointer;
  SaveRequest request;
  request.step = label.value_or(state_.global_step);
  request.metrics = metrics;
  // As transformers' _save_checkpoint: a better metric makes this checkpoint the best one,
  // recorded in the state it saves. (Retention and load_best_model_at_end look at the
  // committed manifests instead, so a save that then fails is never taken for the best.)
  if (is_new_best(metrics)) {
    state_.best_metric = metrics.at(best_metric_key());
    state_.best_model_checkpoint = storage::CheckpointDirectory(checkpointer.root()).step_dir(request.step).string();
  }
  // Parameters and optimizer state change only in optimizer.step(), which waits for the
  // snapshot (take_step): the writer copies them late, overlapping the next step's compute.
  // Everything else (sampler, RNG, user state, which callbacks may change) is copied now.
  export_callback_states();
  const NamedTensors params = named_parameters();
  detail::TrainingSnapshot snapshot =
      detail::capture_snapshot(live_run(params), detail::SnapshotUse::kCheckpoint, state_.global_step + skipped_steps_,
                               r.plan.steps_per_epoch, args_.resolved_data_seed());
  request.epoch = snapshot.data_order->position.epoch;
  if (args_.save_only_model) detail::keep_model_only(snapshot);
  detail::add_to_save_request(std::move(snapshot), /*copy_model_late=*/args_.save_async, request);
  request.arguments = r.arguments;

  r.last_saved = state_.global_step;
  const bool must_succeed = args_.on_save_error == SaveErrorPolicy::kStop;
  std::optional<SaveResult> previous = checkpointer.save_async(std::move(request));
  if (previous) report_save(*previous, must_succeed);
  if (!args_.save_async) {
    if (auto done = checkpointer.wait()) report_save(*done, must_succeed);
  }
}

void Trainer::report_save(const SaveResult& result, bool must_succeed) {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  switch (result.outcome) {
    case SaveOutcome::kCommitted:
      log->info("saved checkpoint {} (step stalled {:.3f} s for the snapshot; write + commit {:.3f} s)",
                result.dir.string(), result.snapshot_seconds, result.write_seconds);
      notify([&](TrainerCallback& cb) { cb.on_save(args_, state_, control_, result.dir.string()); });
      return;
    case SaveOutcome::kSuperseded:
      // The peer this rank waited on is gone and a newer generation is declared: the training
      // loop recovers in process (Trainer::train), and the healed generation takes the save again.
      throw PeerLostError(result.error);
    case SaveOutcome::kFenced:
      // Across nodes the rendezvous formed a newer generation while this rank trained on: with
      // in-process recovery that is a lost peer as above.
      if (run_ && run_->heals_in_process) throw PeerLostError(result.error);
      break;
    case SaveOutcome::kFailed: break;
  }
  logger("tenax.trainer")->error("checkpoint of step {} failed: {}", result.step, result.error);
  notify([&](TrainerCallback& cb) { cb.on_save_error(args_, state_, control_, result.error); });
  // Whatever on_save_error says: a newer generation formed without this process, so the steps it
  // trains can never be saved. It ends (not with exit 3: nothing was saved to resume from, and
  // this is no preemption) so that its agent re-joins the current generation.
  if (result.outcome == SaveOutcome::kFenced) {
    throw RendezvousError(result.error + "; stopping this worker so that its agent re-joins the current generation");
  }
  if (must_succeed) throw StorageError(result.error);
  log->warn("training goes on (on_save_error = continue); the previous checkpoint is intact");
}

std::optional<std::int64_t> Trainer::restore() {
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  const int rank = context_.rank();
  // Parameters are read in place (no second copy of the model in memory); the optimizer's
  // state is allocated by the load and adopted as is.
  const NamedTensors params = named_parameters();
  const std::map<std::string, torch::Tensor> in_place = detail::model_destinations(params);
  const auto wanted = [&](const std::string& name) {
    return detail::restored_from_checkpoint(name, rank, user_state_);
  };
  const auto destination = [&](const std::string& name) {
    const auto it = in_place.find(name);
    return it == in_place.end() ? torch::Tensor() : it->second;
  };
  const detail::ResumeChoice& choice = run_->resume;
  auto loaded = choice.from == detail::ResumeChoice::From::kGiven
                    ? std::optional<LoadedCheckpoint>(run_->checkpointer->load_from(choice.dir, wanted, destination))
                    : run_->checkpointer->load_latest(wanted, destination);
  if (!loaded) return std::nullopt;
  const std::string dir = loaded->dir.string();
  detail::check_resumed_arguments(loaded->arguments, args_, dir);  // an older one may have loaded
  const detail::TrainingSnapshot snapshot = detail::snapshot_from_checkpoint(*loaded);

  // The data position first: a changed seed or global batch would silently change which
  // samples come next, so both are refused (the run stops) before the optimizer, the RNG and
  // the step are touched; the parameters were already read in place.
  const std::optional<detail::SavedDataOrder>& order = snapshot.data_order;
  if (!order) throw StorageError(dir + ": the sampler position is missing or malformed");
  if (order->seed != args_.resolved_data_seed()) {
    throw ConfigError("TrainingArguments.data_seed: the checkpoint in " + dir + " ordered its data with seed " +
                      std::to_string(order->seed) + ", this run with " + std::to_string(args_.resolved_data_seed()) +
                      " (data_seed, else seed); resuming would change the data order. Use the same seeds or another "
                      "output_dir");
  }
  if (order->global_batch != state_.train_batch_size) {  // begin() adapts accumulation first
    throw StorageError(dir + ": the sampler says global batch " + std::to_string(order->global_batch) +
                       " but the manifest said " + std::to_string(state_.train_batch_size));
  }
  restored_position_ = order->position;

  torch::NoGradGuard no_grad;
  const detail::LiveRun live = live_run(params);
  detail::apply_model_state(snapshot, live, dir);
  const bool model_only = detail::saved_model_only(loaded->arguments);
  if (model_only) {
    log->warn(
        "{} holds the model only (saved with save_only_model = true): the optimizer starts with fresh moments and "
        "random streams derived from (seed, rank, step); the step, the schedule and the data position go on from "
        "step {}. The run is no longer the uninterrupted one",
        dir, loaded->step);
  }
  const auto lookup = snapshot.lookup();
  if (user_state_ != nullptr) user_state_->restore(rank, lookup);
  const bool own_rng = restore_rng_states(rank, lookup);
  if (!own_rng) {
    // A rank the writing world did not have (or a model-only checkpoint, said above): a
    // deterministic stream of its own (docs/checkpoints.md, "Resume semantics").
    torch::manual_seed(detail::derived_seed(args_.seed, rank, loaded->step));
  }
  if (!own_rng && !model_only) {
    logger("tenax.trainer")
        ->warn(
            "checkpoint has no RNG state for rank {} (it was written by {} ranks); "
            "derived one from (seed, rank, step)",
            rank, loaded->world_size);
  }
  detail::apply_progress(snapshot, state_);
  if (args_.restore_callback_states_from_checkpoint) restore_callback_states(dir);
  state_.resumed_from_step = state_.global_step;
  // What the resume restored, in one line (transformers says it over several).
  std::string restored =
      std::string(model_only ? "parameters (a fresh optimizer: save_only_model)" : "parameters, optimizer state") +
      ", schedule at step " + std::to_string(state_.global_step) +
      (own_rng ? ", random streams" : ", random streams derived (no saved ones for this rank)") +
      ", data position (epoch " + std::to_string(order->position.epoch) + ", sample " +
      std::to_string(order->position.cursor) + ")";
  if (state_.loss_scale) restored += fmt::format(", fp16 loss scale {}", state_.loss_scale->scale);
  if (!state_.stateful_callbacks.empty()) {
    std::string names;
    for (const auto& item : state_.stateful_callbacks.items()) names += (names.empty() ? "" : ", ") + item.key();
    restored += args_.restore_callback_states_from_checkpoint
                    ? ", the state of " + names
                    : ", not the callbacks' (restore_callback_states_from_checkpoint = false)";
  }
  if (user_state_ != nullptr && !user_state_->empty()) restored += ", the registered user state";
  log->info("resumed from {} at step {}: {} (generation {}, restart {}{})", dir, loaded->step, restored,
            context_.generation(), context_.restart_count(),
            loaded->world_size != context_.world_size() ? ", resharded from " + std::to_string(loaded->world_size) +
                                                              " to " + std::to_string(context_.world_size()) + " ranks"
                                                        : std::string());
  notify([&](TrainerCallback& cb) { cb.on_load(args_, state_, control_, dir); });
  return loaded->step;
}

bool Trainer::is_new_best(const Logs& metrics) const {
  const std::string key = best_metric_key();
  if (key.empty()) return false;
  const auto it = metrics.find(key);
  if (it == metrics.end()) return false;
  return !state_.best_metric ||
         (args_.resolved_greater_is_better() ? it->second > *state_.best_metric : it->second < *state_.best_metric);
}

std::string Trainer::best_metric_key() const {
  const std::string& m = args_.metric_for_best_model;
  if (m.empty() || m.rfind("eval_", 0) == 0) return m;
  return "eval_" + m;
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

void Trainer::save_checkpoint(std::optional<std::int64_t> label) {
  run("save_checkpoint()");
  save({}, label);
}

void Trainer::wait_for_checkpoint() {
  detail::TrainingRun& r = run("wait_for_checkpoint()");
  if (auto done = r.checkpointer->wait()) report_save(*done, /*must_succeed=*/true);
}

}  // namespace tenax::sdk
