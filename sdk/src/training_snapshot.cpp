#include "training_snapshot.h"

#include <algorithm>
#include <memory>
#include <utility>

#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "argument_changes.h"
#include "tenax/storage/checkpoint_directory.h"
#include "tenax/storage/checkpoint_reader.h"

namespace tenax::sdk::detail {
namespace {

constexpr const char* kSamplerName = "sampler";
constexpr const char* kPeerStateName = "trainer/state";

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

void append(NamedTensors& to, NamedTensors from) {
  for (auto& entry : from) to.push_back(std::move(entry));
}

SavedRun saved_run_of(const storage::CheckpointReader& reader, const std::filesystem::path& dir) {
  SavedRun run;
  run.dir = dir.string();
  const nlohmann::json& state = reader.manifest().trainer_state;
  if (state.contains("train_batch_size") && state["train_batch_size"].is_number_integer()) {
    run.global_batch = state["train_batch_size"].get<std::int64_t>();
  }
  run.arguments = reader.manifest().arguments;
  return run;
}

}  // namespace

torch::Tensor SavedDataOrder::to_tensor() const {
  return torch::tensor({static_cast<std::int64_t>(seed), position.epoch, position.cursor, global_batch}, torch::kInt64);
}

std::optional<SavedDataOrder> SavedDataOrder::from_tensor(const torch::Tensor& t) {
  if (!t.defined() || t.scalar_type() != torch::kInt64 || t.numel() != 4) return std::nullopt;
  const torch::Tensor v = t.contiguous();
  const std::int64_t* p = v.data_ptr<std::int64_t>();
  return SavedDataOrder{static_cast<std::uint64_t>(p[0]), {p[1], p[2]}, p[3]};
}

std::int64_t SavedDataOrder::skipped_steps(std::int64_t steps_per_epoch, std::int64_t global_step) const {
  return position.epoch * steps_per_epoch + position.cursor / global_batch - global_step;
}

std::function<torch::Tensor(const std::string&)> TrainingSnapshot::lookup() const {
  auto by_name = std::make_shared<std::map<std::string, torch::Tensor>>();
  for (const NamedTensors* part : {&model, &rng, &user_replicated, &user_per_rank}) {
    for (const auto& [name, t] : *part) by_name->emplace(name, t);
  }
  if (data_order) by_name->emplace(kSamplerName, data_order->to_tensor());
  return [by_name](const std::string& name) {
    const auto it = by_name->find(name);
    return it == by_name->end() ? torch::Tensor() : it->second;
  };
}

TrainingSnapshot capture_snapshot(const LiveRun& live, SnapshotUse use, std::int64_t data_step,
                                  std::int64_t steps_per_epoch, std::uint64_t seed, const torch::Tensor& rng_mirrors) {
  TrainingSnapshot s;
  for (const auto& [name, p] : live.parameters) s.model.emplace_back("model/" + name, p.detach());
  append(s.model, capture_optimizer_state(live.optimizer, live.parameters, Capture::kView));
  const std::int64_t global_batch = live.state.train_batch_size;
  s.data_order =
      SavedDataOrder{seed, {data_step / steps_per_epoch, (data_step % steps_per_epoch) * global_batch}, global_batch};
  if (use == SnapshotUse::kCheckpoint) {
    s.rng = capture_rng_states(live.rank);
    if (live.user_state != nullptr) live.user_state->capture(live.rank, s.user_replicated, s.user_per_rank);
  } else {
    s.rng.emplace_back(kRngMirrorsName, rng_mirrors);
  }
  s.trainer_state = live.state;
  return s;
}

void keep_model_only(TrainingSnapshot& snapshot) {
  auto& model = snapshot.model;
  model.erase(
      std::remove_if(model.begin(), model.end(), [](const auto& entry) { return starts_with(entry.first, "optim/"); }),
      model.end());
  snapshot.rng.clear();
}

bool saved_model_only(const nlohmann::json& recorded_arguments) {
  const auto it = recorded_arguments.find("save_only_model");
  return it != recorded_arguments.end() && it->is_boolean() && it->get<bool>();
}

void add_to_save_request(TrainingSnapshot snapshot, bool copy_model_late, SaveRequest& request) {
  // The order is the write plan's input: the model's tensors, then the data order and the
  // replicated user state (when the model is copied late, they come first: Checkpointer
  // appends the late ones); this rank's streams, then its user state.
  NamedTensors& model = copy_model_late ? request.replicated_copied_late : request.replicated;
  append(model, std::move(snapshot.model));
  request.replicated.emplace_back(kSamplerName, snapshot.data_order->to_tensor());
  append(request.replicated, std::move(snapshot.user_replicated));
  append(request.per_rank, std::move(snapshot.rng));
  append(request.per_rank, std::move(snapshot.user_per_rank));
  request.trainer_state = snapshot.trainer_state.to_json();
}

std::optional<SavedRun> newest_saved_run(const Checkpointer& checkpointer) {
  storage::CheckpointDirectory directory(checkpointer.root());
  const auto steps = directory.committed_steps();
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    auto reader = storage::CheckpointReader::open(directory.step_dir(*it));
    if (reader.is_ok()) return saved_run_of(reader.value(), directory.step_dir(*it));
  }
  return std::nullopt;
}

SavedRun saved_run_at(const std::filesystem::path& step_dir) {
  auto reader = storage::CheckpointReader::open(step_dir);
  if (!reader.is_ok()) {
    throw StorageError("TrainingArguments.resume_from_checkpoint: " + step_dir.string() +
                       " is not a checkpoint that opens: " + reader.status().to_string() + " (`tenax ckpt verify " +
                       step_dir.string() + "` says more)");
  }
  return saved_run_of(reader.value(), step_dir);
}

void check_resumed_arguments(const nlohmann::json& recorded, const TrainingArguments& args, const std::string& dir) {
  const std::vector<ArgumentChange> changes = diff_arguments(recorded, args);
  auto log = logger("tenax.trainer", LogPolicy::kRankZeroOnly);
  for (const ArgumentChange& change : changes) {
    if (change.kind == ArgumentChangeKind::kHarmless)
      log->info("resuming with a changed argument: {}", describe(change));
  }
  if (has_breaking(changes)) throw ConfigError(breaking_changes_message(changes, dir));
}

bool restored_from_checkpoint(const std::string& name, int rank, const UserState* user_state) {
  return starts_with(name, "model/") || starts_with(name, "optim/") ||
         starts_with(name, "rng/rank" + std::to_string(rank) + "/") || name == kSamplerName ||
         (user_state != nullptr && user_state->wants(name, rank));
}

std::map<std::string, torch::Tensor> model_destinations(const NamedTensors& parameters) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, param] : parameters) out.emplace("model/" + name, param.detach());
  return out;
}

TrainingSnapshot snapshot_from_checkpoint(const LoadedCheckpoint& loaded) {
  TrainingSnapshot s;
  for (const auto& [name, t] : loaded.tensors) {
    if (name == kSamplerName) {
      s.data_order = SavedDataOrder::from_tensor(t);
    } else if (starts_with(name, "model/") || starts_with(name, "optim/")) {
      s.model.emplace_back(name, t);
    } else if (starts_with(name, "rng/")) {
      s.rng.emplace_back(name, t);
    } else {
      s.user_replicated.emplace_back(name, t);
    }
  }
  s.trainer_state = TrainerState::from_json(loaded.trainer_state);
  // The checkpoint is named by its label: the optimizer step for train(), the solver's step for
  // an embedding code; the optimizer step itself is in the saved TrainerState.
  const auto step = loaded.trainer_state.find("global_step");
  if (step == loaded.trainer_state.end() || !step->is_number_integer()) s.trainer_state.global_step = loaded.step;
  return s;
}

NamedTensors to_peer_tensors(const TrainingSnapshot& snapshot, std::int64_t last_committed) {
  NamedTensors out = snapshot.model;
  out.emplace_back(kSamplerName, snapshot.data_order->to_tensor());
  append(out, snapshot.rng);
  nlohmann::json state = snapshot.trainer_state.to_json();
  state["last_committed"] = last_committed;
  const std::string text = state.dump();
  out.emplace_back(kPeerStateName, torch::from_blob(const_cast<char*>(text.data()),
                                                    {static_cast<std::int64_t>(text.size())}, torch::kUInt8)
                                       .clone());
  return out;
}

PeerSnapshot snapshot_from_peer(const NamedTensors& received) {
  PeerSnapshot out;
  nlohmann::json state;
  for (const auto& [name, t] : received) {
    if (name == kPeerStateName) {
      state = nlohmann::json::parse(
          std::string(reinterpret_cast<const char*>(t.data_ptr<std::uint8_t>()), static_cast<std::size_t>(t.numel())));
    } else if (name == kSamplerName) {
      out.snapshot.data_order = SavedDataOrder::from_tensor(t);
    } else if (starts_with(name, "rng/")) {
      out.snapshot.rng.emplace_back(name, t);
    } else {
      out.snapshot.model.emplace_back(name, t);
    }
  }
  if (!out.snapshot.data_order) throw RendezvousError("the healing peer sent no data position");
  out.snapshot.trainer_state = TrainerState::from_json(state);
  out.last_committed = state.at("last_committed").get<std::int64_t>();
  return out;
}

void apply_model_state(const TrainingSnapshot& snapshot, const LiveRun& live, const std::string& where) {
  torch::NoGradGuard no_grad;
  const auto lookup = snapshot.lookup();
  for (const auto& [name, param] : live.parameters) {
    torch::Tensor saved = lookup("model/" + name);
    if (!saved.defined()) {
      throw StorageError(where + ": parameter '" + name +
                         "' is missing from the checkpoint; was it written by another model?");
    }
    if (!saved.sizes().equals(param.sizes())) {
      throw StorageError(where + ": parameter '" + name + "' has shape " + c10::str(saved.sizes()) +
                         " in the checkpoint but " + c10::str(param.sizes()) + " in the model");
    }
    if (saved.data_ptr() != param.data_ptr()) param.copy_(saved);  // else it was read in place
  }
  restore_optimizer_state(live.optimizer, live.parameters, lookup);
}

void apply_progress(const TrainingSnapshot& snapshot, TrainerState& state) {
  const TrainerState& saved = snapshot.trainer_state;
  state.global_step = saved.global_step;
  state.log_history = saved.log_history;
  state.best_metric = saved.best_metric;
  state.best_model_checkpoint = saved.best_model_checkpoint;
  state.stateful_callbacks = saved.stateful_callbacks;
  state.loss_scale = saved.loss_scale;
  state.num_input_tokens_seen = saved.num_input_tokens_seen;
}

}  // namespace tenax::sdk::detail
