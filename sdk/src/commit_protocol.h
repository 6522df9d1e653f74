// The commit of one collective save, as run by every rank's checkpoint writer thread
// (DESIGN.md 5). Coordination goes through the generation's key-value store, so the training
// communicator is never used from this thread:
//
//   rank 0:  prepare tmp dir → "<key>prepared"=ok → write shard → wait every "<key>report/<r>"
//            → all ok: manifest last, rename, `latest`, retention → "<key>result"=ok
//            → any error or timeout: no commit, tmp removed → "<key>result"=error:<why>
//   rank r:  wait "<key>prepared" → write shard → "<key>report/<r>"=ok:<shard json>|error:<why>
//            → wait "<key>result"
//
// Fencing (no split brain): with a fence_dir, rank 0 renames the tmp directory into place and
// updates `latest` only while holding the job's GenerationFence with its generation current.
// Once a newer generation formed it commits nothing, removes its tmp directory and publishes
// "fenced:<why>" (as "<key>prepared" when it knows before the write, else as "<key>result"), so
// every rank ends with the same fenced outcome.
// The store holds each outcome as "<tag>:<text>" ("ok", "ok:<shard json>", "error:<why>",
// "fenced:<why>", "superseded:<why>"); it is parsed to a SaveOutcome once, where it is read.
//
// In-process recovery: a dead rank never writes its key, and the waits would run to the
// timeout while the job could be healing. Each wait also reads the agent's superseded mark
// (elastic/in_process_recovery.h) between polls and ends "superseded"; rank 0 publishes
// "superseded:<why>" as "<key>result", so every survivor hands the training loop a lost peer.
//
// Torch-free: the tensors are borrowed storage::TensorRefs of a snapshot the caller keeps alive.
// Thread-safety: run_commit is called by one writer thread per rank; `store` is that thread's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tenax/elastic/store.h"
#include "tenax/sdk/save_outcome.h"
#include "tenax/storage/tensor_bytes.h"

namespace tenax::sdk::detail {

struct CommitPlan {
  std::filesystem::path root;  ///< <output_dir>/checkpoints
  int rank = 0;
  int world_size = 1;
  std::int64_t generation = 0;
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  std::string key_prefix;                   ///< "ckpt/<step>/<n>/", unique per save in a generation
  std::vector<storage::TensorRef> tensors;  ///< what this rank writes
  nlohmann::json trainer_state;             ///< rank 0's manifest fields
  nlohmann::json arguments;
  int save_total_limit = 0;
  std::string metric_for_best_model;
  bool greater_is_better = false;
  std::chrono::milliseconds timeout{0};  ///< for each wait on another rank
  std::filesystem::path fence_dir;       ///< the job's GenerationFence; empty: not fenced
};

/// How this rank's part ended: the same outcome on every rank (see the file comment).
struct CommitOutcome {
  SaveOutcome outcome = SaveOutcome::kFailed;
  std::string error;          ///< what failed, naming the rank (when not committed)
  std::filesystem::path dir;  ///< the committed directory (when committed)
};

/// Runs this rank's part of the protocol above; never throws (every failure is an outcome).
/// Waits on other ranks check `cancelled` at least every `poll` and give up when it is set.
CommitOutcome run_commit(const CommitPlan& plan, elastic::Store& store, const std::atomic<bool>& cancelled,
                         std::chrono::milliseconds poll);

/// The committed step with the best `metric` in its manifest's trainer_state["metrics"], if any.
std::optional<std::int64_t> best_step(const std::filesystem::path& root, const std::string& metric,
                                      bool greater_is_better);

}  // namespace tenax::sdk::detail
