#include "tenax/sdk/callbacks/tensorboard.h"

#include <utility>

#include "callbacks/evaluate_dedup.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/sdk/tensorboard/event_file_writer.h"

namespace tenax::sdk {

TensorBoardCallback::TensorBoardCallback(std::filesystem::path logging_dir)
    : logging_dir_(std::move(logging_dir)), dedup_(std::make_unique<detail::EvaluateDedup>()) {}

TensorBoardCallback::~TensorBoardCallback() = default;

std::string TensorBoardCallback::tag_for(const std::string& key) {
  if (key.rfind("eval_", 0) == 0) return "eval/" + key.substr(5);
  if (key.rfind("test_", 0) == 0) return "test/" + key.substr(5);
  return "train/" + key;
}

std::filesystem::path TensorBoardCallback::event_file() const {
  return writer_ ? writer_->path() : std::filesystem::path();
}

void TensorBoardCallback::open_if_needed() {
  if (!writer_) writer_ = std::make_unique<tensorboard::EventFileWriter>(logging_dir_);
}

void TensorBoardCallback::on_train_begin(const TrainingArguments&, TrainerState& state, TrainerControl&) {
  if (state.is_world_process_zero()) open_if_needed();
}

void TensorBoardCallback::on_log(const TrainingArguments&, TrainerState& state, TrainerControl&, const Logs& logs) {
  if (!state.is_world_process_zero()) return;
  dedup_->logged(state, logs);
  write(state, logs);
}

void TensorBoardCallback::on_evaluate(const TrainingArguments&, TrainerState& state, TrainerControl&,
                                      const Logs& metrics) {
  if (!state.is_world_process_zero() || dedup_->already_logged(state, metrics)) return;
  write(state, metrics);
}

void TensorBoardCallback::write(const TrainerState& state, const Logs& logs) {
  open_if_needed();
  const double wall_time = tensorboard::wall_time_now();
  try {
    for (const auto& [key, value] : logs) {
      if (key == "step") continue;
      writer_->add_scalar(tag_for(key), static_cast<float>(value), state.global_step, wall_time);
    }
  } catch (const StorageError& e) {
    if (!write_failed_) {
      logger("tenax.callbacks")->warn("TensorBoard: {} (further failures are not reported)", e.what());
    }
    write_failed_ = true;
  }
}

}  // namespace tenax::sdk
