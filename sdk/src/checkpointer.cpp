#include "tenax/sdk/checkpointer.h"

#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/tensor_conversion.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"
#include "tenax/storage/layout.h"
#include "tenax/storage/manifest.h"
#include "tenax/storage/shard_writer.h"
#include "tenax/storage/write_plan.h"

namespace tenax::sdk {
namespace {

// null (what `{}` gives at a call site) becomes an empty object; anything else but an object
// is a caller error.
nlohmann::json as_object(const nlohmann::json& value, const char* what) {
  if (value.is_null()) return nlohmann::json::object();
  if (!value.is_object()) {
    throw ConfigError(std::string("Checkpointer::save: ") + what + " must be a JSON object, got " +
                      value.type_name());
  }
  return value;
}

}  // namespace

torch::Tensor LoadedCheckpoint::get(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? torch::Tensor() : it->second;
}

Checkpointer::Checkpointer(const std::filesystem::path& output_dir, elastic::Communicator& comm,
                           std::int64_t generation)
    : root_(output_dir / "checkpoints"), comm_(comm), generation_(generation) {}

std::filesystem::path Checkpointer::save(std::int64_t step, std::int64_t epoch,
                                         const NamedTensors& replicated, const NamedTensors& per_rank,
                                         const nlohmann::json& trainer_state,
                                         const nlohmann::json& arguments) {
  // The manifest stores both as JSON objects and the reader refuses anything else, so refuse
  // it here too, before any I/O: a checkpoint we write must be one we can load.
  const nlohmann::json state_object = as_object(trainer_state, "trainer_state");
  const nlohmann::json arguments_object = as_object(arguments, "arguments");
  const int rank = comm_.rank();
  const int world = comm_.size();
  storage::CheckpointDirectory directory(root_);
  std::filesystem::path tmp = root_ / storage::tmp_dir_name(step, generation_);

  // Rank 0 alone (re)creates the temporary directory: another rank's prepare would delete
  // shards already written into it.
  std::string prepare_error;
  if (rank == 0) {
    try {
      tmp = directory.prepare_tmp(step, generation_);
    } catch (const std::exception& e) {
      prepare_error = e.what();
    }
  }
  std::int32_t prepared = prepare_error.empty() ? 1 : 0;
  comm_.broadcast(&prepared, sizeof prepared, 0);
  if (!prepared) {
    throw StorageError("checkpoint at step " + std::to_string(step) +
                       " not saved: rank 0 could not prepare " + tmp.string() +
                       (prepare_error.empty() ? "" : ": " + prepare_error));
  }

  // Plan: replicated tensors split by bytes; per-rank tensors written by their own rank.
  // Every local failure is caught and reported through the allgather below, so that no rank
  // is left waiting in a collective that a failed peer never enters.
  std::string report;
  try {
    std::vector<torch::Tensor> keep_alive;
    std::vector<std::size_t> sizes;
    for (const auto& [name, t] : replicated) sizes.push_back(static_cast<std::size_t>(t.numel()) * t.element_size());
    const std::vector<int> owner = storage::plan_writes(sizes, world);
    std::vector<storage::TensorRef> mine;
    for (std::size_t i = 0; i < replicated.size(); ++i) {
      if (owner[i] != rank) continue;
      keep_alive.push_back(contiguous_cpu(replicated[i].second));
      mine.push_back(make_ref(replicated[i].first, keep_alive.back()));
    }
    for (const auto& [name, t] : per_rank) {
      keep_alive.push_back(contiguous_cpu(t));
      mine.push_back(make_ref(name, keep_alive.back()));
    }
    const std::filesystem::path shard = tmp / storage::shard_file_name(rank, world);
    auto written = storage::write_shard(shard, mine);
    // "ok:<shard json>" or "error:<message>".
    report = written.is_ok() ? "ok:" + storage::to_json(written.value()).dump()
                             : "error:" + written.status().to_string();
  } catch (const std::exception& e) {
    report = std::string("error:") + e.what();
  }
  const std::vector<std::string> reports = elastic::allgather_strings(comm_, report);
  std::vector<storage::ShardInfo> shards;
  std::string failures;
  for (int r = 0; r < world; ++r) {
    const std::string& rep = reports[static_cast<std::size_t>(r)];
    if (rep.rfind("ok:", 0) == 0) {
      auto info = storage::shard_info_from_json(nlohmann::json::parse(rep.substr(3), nullptr, false));
      if (info.is_ok()) {
        shards.push_back(info.value());
        continue;
      }
      failures += " rank " + std::to_string(r) + ": " + info.status().to_string() + ";";
    } else {
      failures += " rank " + std::to_string(r) + ": " + rep.substr(6) + ";";
    }
  }
  if (!failures.empty()) {
    throw StorageError("checkpoint at step " + std::to_string(step) +
                       " not committed; the previous checkpoint is intact. Failed writes:" + failures);
  }

  std::string commit_error;
  if (rank == 0) {
    try {
      storage::Manifest manifest = storage::make_manifest(step, epoch, generation_, shards);
      manifest.trainer_state = state_object;
      manifest.arguments = arguments_object;
      Status st = directory.commit(tmp, manifest);
      if (!st.is_ok()) commit_error = st.to_string();
    } catch (const std::exception& e) {
      commit_error = e.what();
    }
  }
  std::int32_t committed = commit_error.empty() ? 1 : 0;
  comm_.broadcast(&committed, sizeof committed, 0);
  if (!committed) {
    throw StorageError("checkpoint at step " + std::to_string(step) + " not committed by rank 0" +
                       (commit_error.empty() ? "" : ": " + commit_error) +
                       "; the previous checkpoint is intact");
  }
  return directory.step_dir(step);
}

std::optional<LoadedCheckpoint> Checkpointer::load_latest(
    const std::function<bool(const std::string&)>& wanted) const {
  auto log = logger("tenax.checkpoint");
  if (!std::filesystem::exists(root_)) return std::nullopt;
  storage::CheckpointDirectory directory(root_);
  std::vector<std::int64_t> steps = directory.committed_steps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    const std::filesystem::path dir = directory.step_dir(*it);
    auto reader = storage::CheckpointReader::open(dir);
    if (!reader.is_ok()) {
      log->warn("skipping checkpoint {}: {}; falling back to the previous one", dir.string(),
                reader.status().to_string());
      continue;
    }
    const storage::Manifest& manifest = reader.value().manifest();
    LoadedCheckpoint loaded;
    loaded.dir = dir;
    loaded.step = manifest.step;
    loaded.epoch = manifest.epoch;
    loaded.world_size = manifest.world_size;
    loaded.trainer_state = manifest.trainer_state;
    loaded.arguments = manifest.arguments;
    std::string fault;
    for (const auto& [name, entry] : manifest.tensors) {
      if (!wanted(name)) continue;
      auto data = reader.value().read(name);
      if (!data.is_ok()) {
        fault = data.status().to_string();
        break;
      }
      loaded.tensors.emplace(name, to_tensor(data.value()));
    }
    if (!fault.empty()) {
      log->warn("skipping checkpoint {}: {}; falling back to the previous one", dir.string(), fault);
      continue;
    }
    return loaded;
  }
  return std::nullopt;
}

}  // namespace tenax::sdk
