// Saving and restoring training state as sharded HDF5 checkpoints (DESIGN.md section 5),
// usable with or without the Trainer.
//
// save() is COLLECTIVE: every rank passes the same replicated tensors (model, optimizer,
// sampler, ...) and its own per-rank tensors (RNG); the replicated ones are split by bytes
// so each rank writes about 1/N; rank 0 commits (manifest last, rename, `latest`).
// If any rank fails to write, no rank commits and every rank throws StorageError; the
// previous checkpoint is untouched.
// load_latest() is NOT collective: each rank reads what it needs from the newest committed
// checkpoint that verifies, falling back to older ones with a warning naming the fault.
// Thread-safety: training thread only.
//
//   Checkpointer ckpt(args.output_dir, ctx.communicator(), ctx.generation());
//   ckpt.save(step, epoch, replicated, per_rank, state_json, args_json);
//   auto loaded = ckpt.load_latest([](const std::string& n) { return n.rfind("model/", 0) == 0; });
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "tenax/elastic/communicator.h"
#include "tenax/sdk/state_capture.h"

namespace tenax::sdk {

/// The tensors of one committed checkpoint, read and verified.
struct LoadedCheckpoint {
  std::filesystem::path dir;
  std::int64_t step = 0;
  std::int64_t epoch = 0;
  int world_size = 0;
  nlohmann::json trainer_state;
  nlohmann::json arguments;
  std::map<std::string, torch::Tensor> tensors;
  /// The tensor, or an undefined tensor when the checkpoint has no such name.
  torch::Tensor get(const std::string& name) const;
};

class Checkpointer {
 public:
  /// Checkpoints live in `<output_dir>/checkpoints`. `comm` is borrowed for save().
  Checkpointer(const std::filesystem::path& output_dir, elastic::Communicator& comm,
               std::int64_t generation);

  /// Collective; see the file comment. Returns the committed directory.
  std::filesystem::path save(std::int64_t step, std::int64_t epoch, const NamedTensors& replicated,
                             const NamedTensors& per_rank, const nlohmann::json& trainer_state,
                             const nlohmann::json& arguments);

  /// Reads every tensor for which `wanted(name)` is true from the newest committed checkpoint
  /// that verifies; a fault (manifest, missing shard, checksum, ...) is logged and the previous
  /// committed checkpoint is tried. nullopt when none loads.
  std::optional<LoadedCheckpoint> load_latest(
      const std::function<bool(const std::string&)>& wanted) const;

  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
  elastic::Communicator& comm_;
  std::int64_t generation_;
};

}  // namespace tenax::sdk
