#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {

nlohmann::json TrainerState::to_json() const {
  return {{"global_step", global_step},       {"epoch", epoch},
          {"max_steps", max_steps},           {"num_train_epochs", num_train_epochs},
          {"logging_steps", logging_steps},   {"save_steps", save_steps},
          {"train_batch_size", train_batch_size}, {"world_size", world_size},
          {"generation", generation},         {"log_history", log_history}};
}

}  // namespace tenax::sdk
