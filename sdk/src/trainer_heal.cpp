// Trainer and in-process recovery (DESIGN.md decision 13): after a lost peer, a survivor keeps
// its state, rejoins the next generation and heals it; a replacement takes its state from a live
// peer's memory at begin(). The state travels as a TrainingSnapshot (training_snapshot.h), the
// same one a checkpoint holds. Kept apart from the training loop in trainer.cpp.
#include <chrono>
#include <map>
#include <utility>

#include <torch/torch.h>

#include "peer_heal.h"
#include "step_flow.h"
#include "training_run.h"
#include "training_snapshot.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/trainer.h"
#include "tenax/storage/checkpoint_directory.h"

namespace tenax::sdk {
namespace {

using Clock = std::chrono::steady_clock;

// How long a survivor waits for the agent to declare the next generation and for its peers
// (a warm spare at once, a fresh process after it has loaded libtorch) to connect.
constexpr std::chrono::seconds kRejoinTimeout{120};

}  // namespace

bool Trainer::begin_from_peers() {
  if (!context_.identity().replacement) return false;
  detail::TrainingRun& r = *run_;
  // A warm spare or a fresh process in a lost rank's place: the job runs on, and this rank
  // takes its state from a peer's memory, not from disk (heal_from_peers).
  notify([&](TrainerCallback& cb) { cb.on_restart(args_, state_, control_); });
  r.holds_state = false;
  if (heal_until_healed(Clock::now(), /*rejoin_first=*/false)) {
    healed_at_begin_ = true;
    return true;
  }
  // No rank of this generation holds training state: every one is a replacement (across
  // nodes every worker starts as one, so in a job's first generation, or after every worker
  // was lost). They all start from the newest checkpoint, together.
  r.holds_state = true;
  return false;
}

std::optional<std::int64_t> Trainer::recover(const std::string& why) {
  if (!step_recovery_ || !recover_in_process(why)) return std::nullopt;
  // A preemption answer from a step whose later collective failed is this rank's alone: the next
  // preemption_agreed() must ask every rank (the replacement has no such answer).
  run_->preemption_from_step.reset();
  return state_.global_step;
}

bool Trainer::recover_in_process(const std::string& why) {
  if (!run_ || !run_->heals_in_process) return false;
  const auto noticed = Clock::now();
  logger("tenax.trainer")
      ->warn(
          "generation {} lost a peer during step {} ({}); recovering in process: this process keeps its state "
          "and joins the next generation",
          context_.generation(), state_.global_step + 1, why);
  heal_until_healed(noticed, /*rejoin_first=*/true);
  return true;
}

bool Trainer::heal_until_healed(Clock::time_point since, bool rejoin_first) {
  detail::TrainingRun& r = *run_;
  for (bool rejoin = rejoin_first;; rejoin = true) {
    if (rejoin) {
      // The communicator goes first, so that peers still blocked on this rank fail now; a
      // TimeoutError here (no agent declared a generation) ends the process.
      context_.rejoin(kRejoinTimeout);
      r.rejoined(context_);
    }
    try {
      const bool healed = heal_from_peers(since);
      // The registered state of the step the job healed to, on every rank (the survivors too).
      if (healed && r.user_mirror) r.user_mirror->heal(context_.communicator(), state_.global_step);
      return healed;
    } catch (const PeerLostError& e) {
      logger("tenax.trainer")
          ->warn("generation {} lost a peer while it healed ({}); joining the next one", context_.generation(),
                 e.what());
    } catch (const TimeoutError& e) {
      logger("tenax.trainer")
          ->warn("generation {} timed out while it healed ({}); joining the next one", context_.generation(), e.what());
    }
  }
}

bool Trainer::heal_from_peers(Clock::time_point since) {
  detail::TrainingRun& r = *run_;
  elastic::Communicator& comm = context_.communicator();
  const int rank = context_.rank();
  const std::vector<detail::HealStatus> statuses =
      detail::exchange_heal_status(comm, {r.holds_state ? state_.global_step : -1});
  const std::optional<detail::HealPlan> plan = detail::plan_heal(statuses);
  if (!plan) {
    // Every rank sees the same statuses: they all say so, and begin() starts them from disk.
    logger("tenax.trainer", LogPolicy::kRankZeroOnly)
        ->warn(
            "generation {}: no rank holds training state to heal from (every rank is a replacement); starting "
            "from the newest checkpoint",
            context_.generation());
    return false;
  }
  const NamedTensors params = named_parameters();
  NamedTensors outgoing;
  std::int64_t last_committed = -1;
  if (rank == plan->source) {
    export_callback_states();
    // What is on disk, not what was started: a save in flight when the peer was lost never
    // committed.
    const std::optional<std::int64_t> committed = storage::CheckpointDirectory(r.checkpointer->root()).latest_step();
    last_committed = committed ? *committed : -1;
    outgoing = detail::to_peer_tensors(
        detail::capture_snapshot(live_run(params), detail::SnapshotUse::kHeal, state_.global_step + skipped_steps_,
                                 r.plan.steps_per_epoch, args_.resolved_data_seed(), r.grad_sync->mirrors()),
        last_committed);
  }
  const std::map<std::string, torch::Tensor> in_place = detail::model_destinations(params);
  torch::NoGradGuard no_grad;
  const NamedTensors received = detail::broadcast_named_tensors(
      comm, plan->source, outgoing, [&](const std::string& name, torch::ScalarType, c10::IntArrayRef) {
        const auto it = in_place.find(name);
        return it == in_place.end() ? torch::Tensor() : it->second;
      });
  std::int64_t global_batch = r.plan.global_batch;
  std::optional<detail::SavedDataOrder> order;
  if (rank != plan->source) {
    const detail::PeerSnapshot peer = detail::snapshot_from_peer(received);
    detail::apply_model_state(peer.snapshot, live_run(params), "healing from rank " + std::to_string(plan->source));
    r.grad_sync->set_mirrors(peer.snapshot.lookup()(detail::kRngMirrorsName));
    detail::apply_progress(peer.snapshot, state_);
    // Whatever restore_callback_states_from_checkpoint says: every rank must take the callbacks'
    // decisions (early stopping) alike.
    restore_callback_states("healing from rank " + std::to_string(plan->source));
    state_.epoch = peer.snapshot.trainer_state.epoch;
    last_committed = peer.last_committed;
    global_batch = peer.snapshot.trainer_state.train_batch_size;
    order = peer.snapshot.data_order;
  }
  adapt_to_world(global_batch);
  // The data position in the plan of this world (the same global batch: the same steps per epoch).
  if (order) skipped_steps_ = order->skipped_steps(r.plan.steps_per_epoch, state_.global_step);
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
      ->warn(
          "healed from rank {} in {:.0f} ms: generation {} goes on at step {}, 0 steps lost (the step in flight is "
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
  detail::TrainingRun& r = *run_;
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
    r.order_data(*train_dataset_, args_, r.plan.global_batch);
  }
  state_.world_size = world;
  state_.train_batch_size = r.plan.global_batch;
  logger("tenax.trainer", LogPolicy::kRankZeroOnly)
      ->warn("the world is {} ranks now (was {}): {} per device x {} accumulation (was {}) keeps the global batch {}",
             world, was_world, args_.per_device_train_batch_size, accumulation_steps_, was_accumulation,
             r.plan.global_batch);
}

}  // namespace tenax::sdk
