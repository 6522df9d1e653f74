// TensorBoardCallback: rank 0's log entries and evaluations as TensorBoard scalars in an event
// file under the logging directory (tensorboard --logdir <logging_dir>).
//
// Tags follow transformers' TensorBoardCallback (rewrite_logs): "eval_x" -> "eval/x",
// "test_x" -> "test/x", anything else -> "train/x" ("train/loss", "train/learning_rate",
// "train/epoch", ...), at step state.global_step. The "step" entry of the Trainer's logs is the
// event's step and is not written as a scalar. Values are stored as float32, as in every
// TensorBoard scalar.
//
// The event file is created at on_train_begin (or at the first entry); a resumed run starts a
// new file in the same directory, which TensorBoard reads as one run. Every event is written
// with one write(2) (no buffering, so a running TensorBoard sees it at once).
// Errors: as JsonlMetricsCallback — opening throws StorageError naming the path, a later write
// failure is logged once and training goes on. on_evaluate writes only what on_log did not
// already write at the same step (see jsonl_metrics.h).
// Thread-safety: training thread only. Not collective; ranks other than 0 do nothing.
//
//   trainer.add_callback(std::make_shared<tenax::sdk::TensorBoardCallback>(args.resolved_logging_dir()));
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {
namespace detail {
class EvaluateDedup;
}
namespace tensorboard {
class EventFileWriter;
}

class TensorBoardCallback : public TrainerCallback {
 public:
  /// Writes an event file into `logging_dir`; nothing is created before the first hook on rank 0.
  explicit TensorBoardCallback(std::filesystem::path logging_dir);
  ~TensorBoardCallback() override;

  void on_train_begin(const TrainingArguments& args, TrainerState& state, TrainerControl& control) override;
  void on_log(const TrainingArguments& args, TrainerState& state, TrainerControl& control, const Logs& logs) override;
  void on_evaluate(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
                   const Logs& metrics) override;

  /// The event file; empty before it is created.
  std::filesystem::path event_file() const;

  /// transformers' tag for a log key: "eval_loss" -> "eval/loss", "loss" -> "train/loss".
  static std::string tag_for(const std::string& key);

 private:
  void open_if_needed();
  void write(const TrainerState& state, const Logs& logs);

  std::filesystem::path logging_dir_;
  std::unique_ptr<tensorboard::EventFileWriter> writer_;
  std::unique_ptr<detail::EvaluateDedup> dedup_;
  bool write_failed_ = false;
};

}  // namespace tenax::sdk
