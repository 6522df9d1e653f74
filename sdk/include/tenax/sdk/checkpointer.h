// Saving and restoring training state as sharded HDF5 checkpoints (DESIGN.md section 5),
// usable with or without the Trainer.
//
// save_async() is COLLECTIVE (every rank, same step, same replicated names, in the same order):
// it first waits for the previous save of this Checkpointer, then snapshots — copies to host
// memory, into the previous save's buffers when shapes match — only what this rank writes (its
// byte-balanced share of the replicated tensors plus its own per-rank tensors) and returns;
// tensors in replicated_copied_late are copied by the writer thread instead, and the caller
// waits for that copy (wait_for_snapshot) before it modifies them. A background thread then writes the rank's HDF5
// shard and takes part in the commit, which is coordinated through the rendezvous store (keys under this generation's
// "gen/<n>/ckpt/..."), never through the training communicator:
//   rank 0 prepares the tmp directory → every rank writes its shard and reports its checksum →
//   rank 0 checks every report, writes manifest.json last, renames the directory, updates
//   `latest`, applies the retention policy → every rank learns the result.
// If any rank fails, nothing is committed and the previous checkpoint is untouched; every rank
// gets the same SaveResult (its SaveOutcome and message). wait() returns the result of the save in flight.
// Fencing: in a job with a GenerationFence (WorkerContext::fence()) rank 0 renames and updates
// `latest` only while this Checkpointer's generation is current; a save by a generation that a
// newer one replaced commits nothing and ends SaveOutcome::kFenced on every rank (the
// process belongs to a stale partition and must stop training: the Trainer exits, see trainer.h).
// load_latest() is NOT collective: each rank reads what it needs from the newest committed
// checkpoint that verifies, falling back to older ones with a warning naming the fault. It works
// whatever world size wrote the checkpoint (tensors are found through the manifest's index).
//
// Thread-safety: all members are called from the training thread only; the writer thread is
// owned, joined before the next save and by the destructor. The destructor never blocks on
// peers: a writer still waiting for other ranks gives up within kCancelLatency.
//
//   Checkpointer ckpt(args.output_dir, ctx, {});
//   if (auto previous = ckpt.save_async({step, epoch, replicated, per_rank, state, args}))
//     report(*previous);
//   ...
//   auto loaded = ckpt.load_latest([](const std::string& n) { return n.rfind("model/", 0) == 0; });
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "tenax/elastic/store.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/save_outcome.h"
#include "tenax/sdk/state_capture.h"

namespace tenax::sdk {

namespace detail {
class WriterThread;
}  // namespace detail

/// The tensors of one committed checkpoint, read and verified.
struct LoadedCheckpoint {
  std::filesystem::path dir;
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  int world_size = 0;  ///< ranks that wrote it (may differ from the world that loads it)
  nlohmann::json trainer_state;
  nlohmann::json arguments;
  std::map<std::string, torch::Tensor> tensors;
  /// The tensor, or an undefined tensor when the checkpoint has no such name.
  torch::Tensor get(const std::string& name) const;
};

struct CheckpointerOptions {
  /// Keep this many newest committed checkpoints (plus the best, see below); 0 keeps all.
  int save_total_limit = 0;
  /// A key of the `metrics` passed with each save ("eval_loss", ...); the committed checkpoint
  /// with the best value is never pruned. Empty: no best is kept apart.
  std::string metric_for_best_model;
  /// Whether a larger metric is better.
  bool greater_is_better = false;
  /// How long a rank's writer waits for the other ranks' part of one save.
  std::chrono::milliseconds commit_timeout = std::chrono::minutes(10);
  /// The job's GenerationFence directory (elastic/generation_fence.h); empty: not fenced. The
  /// constructor from a WorkerContext takes the context's fence when this is empty.
  std::filesystem::path fence_dir;
};

/// One collective save.
struct SaveRequest {
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  NamedTensors replicated;  ///< identical on every rank; split by bytes across ranks
  /// Like `replicated`, but save_async() does not copy them before it returns: the writer
  /// thread copies them first, while training goes on, and the caller must call
  /// Checkpointer::wait_for_snapshot() before it next modifies any of them. The Trainer puts
  /// the parameters and the optimizer state here and waits before the optimizer step, so the
  /// copy overlaps the next forward and backward pass (CheckFreq's pipelined snapshot, FAST
  /// '21). Tensors not on the CPU or not contiguous are copied at the call as usual.
  NamedTensors replicated_copied_late;
  NamedTensors per_rank;  ///< this rank's own tensors (RNG, ...), written by this rank
  nlohmann::json trainer_state = nlohmann::json::object();
  nlohmann::json arguments = nlohmann::json::object();
  /// Metrics of this step (for metric_for_best_model); stored in the manifest's trainer_state.
  std::map<std::string, double> metrics;
};

/// How one save ended; every rank gets the same outcome and `dir`.
struct SaveResult {
  SaveResult() = default;
  SaveResult(std::int64_t step, SaveOutcome outcome, std::string error, std::filesystem::path dir = {});

  std::int64_t step = 0;
  SaveOutcome outcome = SaveOutcome::kFailed;
  std::filesystem::path dir;  ///< the committed directory (when committed)
  std::string error;          ///< what failed, naming the rank and file (when not committed)
  /// `outcome` spelled as flags for callers that test one case; set with it by the constructor.
  bool committed = false;
  bool fenced = false;
  bool superseded = false;
  double snapshot_seconds = 0.0;  ///< time the training thread spent copying
  double write_seconds = 0.0;     ///< time the writer spent from start to the known result
};

class Checkpointer {
 public:
  /// How fast a writer waiting on peers notices cancellation (destructor).
  static constexpr std::chrono::milliseconds kCancelLatency{200};

  /// Checkpoints live in `<output_dir>/checkpoints`. Opens its own store connection from
  /// `context` (context.open_store()); rank 0 removes leftover uncommitted directories.
  Checkpointer(const std::filesystem::path& output_dir, const elastic::WorkerContext& context,
               CheckpointerOptions options = {});
  /// The same from parts: `store` is this generation's store view, owned and used only by the
  /// writer thread. For world size 1 any store (e.g. an InMemoryStore) does.
  Checkpointer(const std::filesystem::path& output_dir, int rank, int world_size, std::int64_t generation,
               std::unique_ptr<elastic::Store> store, CheckpointerOptions options = {});
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  /// Collective; see the file comment. Returns the result of the previous save when one was
  /// still to be collected. Throws StorageError (before anything is written) for a tensor of
  /// an unsupported dtype, ConfigError for trainer_state/arguments that are not JSON objects.
  std::optional<SaveResult> save_async(SaveRequest request);

  /// Returns once the save in flight (if any) has copied its `replicated_copied_late`
  /// tensors, after which the caller may modify them again. The time blocked here counts as
  /// the save's stall (SaveResult::snapshot_seconds).
  void wait_for_snapshot();

  /// Allocates and touches the host buffers that save_async() copies `tensors` into (by name,
  /// shape and dtype), ahead of the first save. Without it the first save's copies land in
  /// fresh memory and the page faults cost more than the copies (0.5 ms for a 2 MiB field on
  /// this project's 2-core VM: bench/sim_overhead.py): a stall in the caller's loop. Not
  /// collective; a no-op for names already staged, and while a save is in flight. A buffer
  /// that no save uses is freed after the next save.
  void reserve_snapshot(const NamedTensors& tensors);

  /// Waits for the save in flight; nullopt when there is none to collect.
  std::optional<SaveResult> wait();

  /// A synchronous save: the same commit as save_async() but written straight from the
  /// request's tensors (no snapshot copy, as the caller waits anyway), then wait(). Returns
  /// the committed directory, throws StorageError when the save was not committed, or
  /// RendezvousError when it was fenced (a newer generation formed).
  std::filesystem::path save(SaveRequest request);

  /// Returns, for a tensor name, the tensor a load should fill in place (say a model
  /// parameter), or an undefined tensor to have one allocated.
  using LoadDestination = std::function<torch::Tensor(const std::string&)>;

  /// Reads every tensor for which `wanted(name)` is true from the newest committed checkpoint
  /// that verifies; a fault (manifest, missing shard, checksum, ...) is logged and the previous
  /// committed checkpoint is tried. nullopt when none loads (or there is none).
  ///
  /// `destination`, when given, lets the load read straight into existing memory: a tensor it
  /// returns that is contiguous, on the CPU and of the checkpoint's dtype and shape is filled
  /// in place and is the one in the result (PyTorch DCP's in-place semantics); anything else
  /// gets a new tensor. Reading into memory that is already mapped is what makes a resume run
  /// at disk speed (bench/checkpoint_bench.cpp). Because a damaged checkpoint is only found
  /// while it is read, a failed attempt may leave such tensors half overwritten: when no
  /// checkpoint then loads, this throws StorageError instead of returning nullopt, so that a
  /// run never silently starts over from clobbered weights.
  std::optional<LoadedCheckpoint> load_latest(const std::function<bool(const std::string&)>& wanted,
                                              const LoadDestination& destination = {}) const;

  /// Reads every tensor `wanted` from the checkpoint in `step_dir` (any directory, not only
  /// under root()), as load_latest reads one; no fallback: a fault throws StorageError naming the
  /// directory (a checkpoint the caller chose must load, or nothing is trained).
  LoadedCheckpoint load_from(const std::filesystem::path& step_dir,
                             const std::function<bool(const std::string&)>& wanted,
                             const LoadDestination& destination = {}) const;

  const std::filesystem::path& root() const { return root_; }

 private:
  struct Job;
  /// How start() gets the bytes the writer reads.
  enum class Snapshot {
    kCopy,    ///< copied before start() returns (replicated_copied_late: by the writer)
    kNoCopy,  ///< the request's own tensors, for a caller that waits for the write
  };
  std::optional<SaveResult> start(SaveRequest request, Snapshot snapshot);
  void start_writer(std::shared_ptr<Job> job);
  /// Whether the fence shows a generation newer than this one (or cannot be read).
  bool stale_generation() const;

  std::filesystem::path root_;
  int rank_;
  int world_size_;
  std::int64_t generation_;
  std::unique_ptr<elastic::Store> store_;
  CheckpointerOptions options_;
  std::int64_t saves_started_ = 0;
  std::shared_ptr<Job> in_flight_;
  std::unique_ptr<detail::WriterThread> writer_;  // started by the first save
  /// The last written snapshot's host buffers by tensor name, copied into by the next save
  /// (no page faults). Memory: one snapshot of this rank's share stays allocated between saves.
  std::map<std::string, torch::Tensor> staging_;
};

}  // namespace tenax::sdk
