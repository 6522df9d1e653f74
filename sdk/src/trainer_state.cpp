#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {
namespace {

// `json[key]` into `field` when it is there with the field's type.
void read_integer(const nlohmann::json& json, const char* key, std::int64_t& field) {
  if (const auto it = json.find(key); it != json.end() && it->is_number_integer()) field = it->get<std::int64_t>();
}

}  // namespace

nlohmann::json TrainerState::to_json() const {
  nlohmann::json out = {{"global_step", global_step},     {"epoch", epoch},
                        {"max_steps", max_steps},         {"num_train_epochs", num_train_epochs},
                        {"logging_steps", logging_steps}, {"eval_steps", eval_steps},
                        {"save_steps", save_steps},       {"train_batch_size", train_batch_size},
                        {"world_size", world_size},       {"generation", generation},
                        {"log_history", log_history},     {"best_model_checkpoint", best_model_checkpoint}};
  out["best_metric"] = best_metric ? nlohmann::json(*best_metric) : nlohmann::json(nullptr);
  out["stateful_callbacks"] = stateful_callbacks;
  out["num_input_tokens_seen"] = num_input_tokens_seen;
  if (loss_scale) out["loss_scale"] = loss_scale->to_json();
  return out;
}

TrainerState TrainerState::from_json(const nlohmann::json& json) {
  TrainerState state;
  if (!json.is_object()) return state;
  read_integer(json, "global_step", state.global_step);
  read_integer(json, "max_steps", state.max_steps);
  read_integer(json, "num_train_epochs", state.num_train_epochs);
  read_integer(json, "logging_steps", state.logging_steps);
  read_integer(json, "eval_steps", state.eval_steps);
  read_integer(json, "save_steps", state.save_steps);
  read_integer(json, "train_batch_size", state.train_batch_size);
  read_integer(json, "generation", state.generation);
  read_integer(json, "num_input_tokens_seen", state.num_input_tokens_seen);
  std::int64_t world_size = state.world_size;
  read_integer(json, "world_size", world_size);
  state.world_size = static_cast<int>(world_size);
  if (const auto it = json.find("epoch"); it != json.end() && it->is_number()) state.epoch = it->get<double>();
  if (const auto it = json.find("log_history"); it != json.end() && it->is_array()) {
    state.log_history = it->get<std::vector<nlohmann::json>>();
  }
  if (const auto it = json.find("best_metric"); it != json.end() && it->is_number()) {
    state.best_metric = it->get<double>();
  }
  if (const auto it = json.find("best_model_checkpoint"); it != json.end() && it->is_string()) {
    state.best_model_checkpoint = it->get<std::string>();
  }
  if (const auto it = json.find("stateful_callbacks"); it != json.end() && it->is_object()) {
    state.stateful_callbacks = *it;
  }
  // Unlike the fields above, a malformed one is refused: a resume with another scale would not be exact.
  if (const auto it = json.find("loss_scale"); it != json.end()) state.loss_scale = LossScaleState::from_json(*it);
  return state;
}

}  // namespace tenax::sdk
