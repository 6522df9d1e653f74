#include "tenax/sdk/callbacks/jsonl_metrics.h"

#include <cmath>
#include <utility>

#include <nlohmann/json.hpp>

#include "append_only_file.h"
#include "callbacks/evaluate_dedup.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::sdk {

JsonlMetricsCallback::JsonlMetricsCallback(std::filesystem::path logging_dir)
    : logging_dir_(std::move(logging_dir)), dedup_(std::make_unique<detail::EvaluateDedup>()) {}

JsonlMetricsCallback::~JsonlMetricsCallback() = default;

void JsonlMetricsCallback::open_if_needed() {
  if (file_) return;
  detail::create_directories_or_throw(logging_dir_, "metrics");
  file_ = std::make_unique<detail::AppendOnlyFile>(detail::AppendOnlyFile::open_append(path()));
  // A line cut short by a crash: end it, so that the next record is a line of its own.
  if (file_->ended_mid_line_at_open()) file_->append("\n");
}

void JsonlMetricsCallback::on_train_begin(const TrainingArguments&, TrainerState& state, TrainerControl&) {
  if (state.is_world_process_zero()) open_if_needed();
}

void JsonlMetricsCallback::on_log(const TrainingArguments&, TrainerState& state, TrainerControl&, const Logs& logs) {
  if (!state.is_world_process_zero()) return;
  dedup_->logged(state, logs);
  write(state, logs);
}

void JsonlMetricsCallback::on_evaluate(const TrainingArguments&, TrainerState& state, TrainerControl&,
                                       const Logs& metrics) {
  if (!state.is_world_process_zero() || dedup_->already_logged(state, metrics)) return;
  write(state, metrics);
}

void JsonlMetricsCallback::write(const TrainerState& state, const Logs& logs) {
  open_if_needed();
  // step and epoch first; step from the state (the Trainer's logs carry it as a double).
  nlohmann::ordered_json record;
  record["step"] = state.global_step;
  const auto epoch = logs.find("epoch");
  record["epoch"] = epoch != logs.end() ? epoch->second : state.epoch;
  for (const auto& [key, value] : logs) {
    if (key == "step" || key == "epoch") continue;
    if (std::isfinite(value)) {
      record[key] = value;
    } else {
      record[key] = nullptr;
    }
  }
  try {
    file_->append(record.dump() + "\n");
  } catch (const StorageError& e) {
    if (!write_failed_)
      logger("tenax.callbacks")->warn("metrics.jsonl: {} (further failures are not reported)", e.what());
    write_failed_ = true;
  }
}

}  // namespace tenax::sdk
