// The training state as one value: what a checkpoint holds, what a resume reads back and what a
// replacement receives from a live peer (DESIGN.md section 5 and decision 13). The parameters, the
// optimizer state, the data order with its position, the random streams, the user's registered
// state and the TrainerState, under the checkpoint format's names: model/<name>,
// optim/<name>/<the optimizer's keys: state_capture.h>, sampler, rng/rank<r>/..., user/<name>.
//
// Save, restore and heal differ only in where a snapshot travels and in its random streams:
//   save     capture_snapshot(kCheckpoint) → to_save_request → Checkpointer (trainer_checkpoint.cpp)
//   restore  Checkpointer::load_latest → snapshot_from_checkpoint → apply_* (trainer_checkpoint.cpp)
//   heal     capture_snapshot(kHeal) → to_peer_tensors → broadcast → snapshot_from_peer → apply_*
//            (trainer_heal.cpp)
// A checkpoint carries each rank's own streams and user state; a heal carries every rank's CPU
// stream as the last step mirrored it ("rng/mirrors"; the registered user state heals through
// UserStateMirror) and which step is on disk.
// Thread-safety: training thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "tenax/sdk/checkpointer.h"
#include "tenax/sdk/sampler.h"
#include "tenax/sdk/state_capture.h"
#include "tenax/sdk/trainer_callback.h"
#include "tenax/sdk/user_state.h"

namespace tenax::sdk::detail {

// The checkpoint's "sampler" tensor, int64 [seed, epoch, cursor, global_batch]: the data order
// with its position, so that a resume can refuse a run whose data order would differ. Named
// fields here, the tensor only at the checkpoint boundary (its layout is the file format).
struct SavedDataOrder {
  std::uint64_t seed = 0;
  SamplerPosition position;
  std::int64_t global_batch = 0;

  torch::Tensor to_tensor() const;
  /// nullopt when the tensor is absent or not four int64 values.
  static std::optional<SavedDataOrder> from_tensor(const torch::Tensor& t);
  /// Global batches of the data order that should_epoch_stop skipped by `global_step` (negative:
  /// replayed by ignore_data_skip resumes), in a run of `steps_per_epoch` steps of this global batch.
  std::int64_t skipped_steps(std::int64_t steps_per_epoch, std::int64_t global_step) const;
};

/// The per-rank seed of a fresh run; also how a rank with no saved RNG state derives one: a
/// fixed function of (seed, rank, step), documented in docs/checkpoints.md ("Resume semantics").
inline std::uint64_t derived_seed(std::uint64_t seed, int rank, std::int64_t step) {
  return seed + 1000003ull * static_cast<std::uint64_t>(rank) + 7919ull * static_cast<std::uint64_t>(step);
}

/// A heal's random streams: every rank's CPU generator state, one row per rank.
inline constexpr const char* kRngMirrorsName = "rng/mirrors";

/// What a snapshot is for: which random streams and whether the user's state rides along.
enum class SnapshotUse { kCheckpoint, kHeal };

/// The live run a snapshot is captured from and applied to; borrowed for one call.
struct LiveRun {
  const NamedTensors& parameters;  ///< the model's, by name
  torch::optim::Optimizer& optimizer;
  TrainerState& state;
  const UserState* user_state = nullptr;  ///< the registered one, if any
  int rank = 0;
};

struct TrainingSnapshot {
  /// model/<name>, then optim/<name>/...: views of the live tensors when captured (the next
  /// optimizer step changes them).
  NamedTensors model;
  /// "sampler"; nullopt when a checkpoint lacks it or it is malformed.
  std::optional<SavedDataOrder> data_order;
  /// kCheckpoint: this rank's rng/rank<r>/...; kHeal: "rng/mirrors", every rank's CPU stream.
  NamedTensors rng;
  /// user/<name>: identical on every rank, and this rank's own. A loaded snapshot lists all of
  /// them as replicated (a load cannot tell them apart; they are restored by name).
  NamedTensors user_replicated;
  NamedTensors user_per_rank;
  TrainerState trainer_state;

  /// Any of its tensors by name; undefined when absent. Built once per call.
  std::function<torch::Tensor(const std::string&)> lookup() const;
};

/// Collective-free: the live run's state at optimizer step `live.state.global_step`, whose data
/// position is global batch `data_step` of `steps_per_epoch`; `seed` names the data order.
/// kHeal takes `rng_mirrors` (GradSync's) as its random streams.
TrainingSnapshot capture_snapshot(const LiveRun& live, SnapshotUse use, std::int64_t data_step,
                                  std::int64_t steps_per_epoch, std::uint64_t seed,
                                  const torch::Tensor& rng_mirrors = {});

/// What save_only_model keeps of a checkpoint snapshot: the parameters, the data position, the
/// TrainerState and the registered user state; the optimizer state and the random streams go.
void keep_model_only(TrainingSnapshot& snapshot);

/// Whether a checkpoint was saved with save_only_model, by the arguments it recorded (not by
/// its tensors: SGD without momentum has no optimizer state to save either).
bool saved_model_only(const nlohmann::json& recorded_arguments);

/// The snapshot as a collective save's tensors, in the order the write plan splits them:
/// the parameters and optimizer state in `replicated_copied_late` when `copy_model_late`.
void add_to_save_request(TrainingSnapshot snapshot, bool copy_model_late, SaveRequest& request);

/// What the newest committed checkpoint whose manifest opens recorded (the manifest only: no
/// shard is read): the run's global batch and arguments, checked before anything is loaded.
struct SavedRun {
  std::string dir;
  std::optional<std::int64_t> global_batch;
  nlohmann::json arguments;
};
std::optional<SavedRun> newest_saved_run(const Checkpointer& checkpointer);
/// The checkpoint in `step_dir` (resume_from_checkpoint's); throws StorageError when it does not open.
SavedRun saved_run_at(const std::filesystem::path& step_dir);
/// A resume with arguments that would make it another run is refused (ConfigError) before
/// anything is loaded (argument_changes.h says which); the harmless changes are logged.
void check_resumed_arguments(const nlohmann::json& recorded, const TrainingArguments& args, const std::string& dir);

/// Whether a resume on `rank` reads the checkpoint tensor `name`.
bool restored_from_checkpoint(const std::string& name, int rank, const UserState* user_state);
/// Where a load or a heal puts the parameters: in place, "model/<name>" → the parameter.
std::map<std::string, torch::Tensor> model_destinations(const NamedTensors& parameters);
/// A loaded checkpoint as a snapshot. Its TrainerState's global_step is the checkpoint's step
/// where the manifest does not record one (the step is then its name).
TrainingSnapshot snapshot_from_checkpoint(const LoadedCheckpoint& loaded);

/// The tensors a heal broadcasts; `last_committed` (the newest step on disk) rides with the
/// TrainerState in "trainer/state" (its JSON as uint8).
NamedTensors to_peer_tensors(const TrainingSnapshot& snapshot, std::int64_t last_committed);
struct PeerSnapshot {
  TrainingSnapshot snapshot;
  std::int64_t last_committed = -1;
};
/// What a heal's receiver got (to_peer_tensors on the source).
PeerSnapshot snapshot_from_peer(const NamedTensors& received);

/// The parameters (copied unless read in place) and the optimizer state. Throws StorageError
/// naming `where` for a parameter the snapshot lacks or holds in another shape.
void apply_model_state(const TrainingSnapshot& snapshot, const LiveRun& live, const std::string& where);
/// The run's progress: its step, log history, best metric and the checkpoint of that metric.
void apply_progress(const TrainingSnapshot& snapshot, TrainerState& state);

}  // namespace tenax::sdk::detail
