#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {

nlohmann::json TrainerState::to_json() const {
  nlohmann::json out = {{"global_step", global_step},       {"epoch", epoch},
                        {"max_steps", max_steps},           {"num_train_epochs", num_train_epochs},
                        {"logging_steps", logging_steps},   {"eval_steps", eval_steps},
                        {"save_steps", save_steps},         {"train_batch_size", train_batch_size},
                        {"world_size", world_size},         {"generation", generation},
                        {"log_history", log_history},       {"best_model_checkpoint", best_model_checkpoint}};
  out["best_metric"] = best_metric ? nlohmann::json(*best_metric) : nlohmann::json(nullptr);
  return out;
}

}  // namespace tenax::sdk
