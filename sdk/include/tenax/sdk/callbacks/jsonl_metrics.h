// JsonlMetricsCallback: every log entry and evaluation of rank 0 as one JSON object per line in
// <logging_dir>/metrics.jsonl — {"step": 50, "epoch": 0.5, "loss": 0.69, ...}.
//
// The file is opened for appending at on_train_begin (or at the first entry), creating the
// directory; an existing file keeps its lines, so a resumed run continues it (the steps between
// the checkpoint and the failure then appear twice: the later line is the one of the run that
// went on). A line cut short by a crash is ended before the next one. Each line is written with
// one write(2), so it is in the file when the hook returns. Non-finite values are written as
// null (JSON has no NaN).
//
// Errors: a directory or file that cannot be created or opened throws StorageError naming the
// path (at on_train_begin, before any step). A write failing later (disk full) is logged once
// as a warning and training goes on: metrics never stop a run.
//
// Trainer::evaluate reports its metrics through on_log and then on_evaluate; on_evaluate
// writes only when the same metrics were not just written by on_log at the same step, so an
// evaluation is one line whether the caller reports it through one hook or both.
// Thread-safety: training thread only. Not collective; ranks other than 0 do nothing.
//
//   trainer.add_callback(std::make_shared<tenax::sdk::JsonlMetricsCallback>(args.resolved_logging_dir()));
#pragma once

#include <filesystem>
#include <memory>

#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {
namespace detail {
class AppendOnlyFile;
class EvaluateDedup;
}  // namespace detail

class JsonlMetricsCallback : public TrainerCallback {
 public:
  /// File name inside the logging directory.
  static constexpr const char* kFileName = "metrics.jsonl";

  /// Writes to `logging_dir`/metrics.jsonl; nothing is created before the first hook on rank 0.
  explicit JsonlMetricsCallback(std::filesystem::path logging_dir);
  ~JsonlMetricsCallback() override;

  void on_train_begin(const TrainingArguments& args, TrainerState& state, TrainerControl& control) override;
  void on_log(const TrainingArguments& args, TrainerState& state, TrainerControl& control, const Logs& logs) override;
  void on_evaluate(const TrainingArguments& args, TrainerState& state, TrainerControl& control,
                   const Logs& metrics) override;

  /// <logging_dir>/metrics.jsonl
  std::filesystem::path path() const { return logging_dir_ / kFileName; }

 private:
  void open_if_needed();
  void write(const TrainerState& state, const Logs& logs);

  std::filesystem::path logging_dir_;
  std::unique_ptr<detail::AppendOnlyFile> file_;
  std::unique_ptr<detail::EvaluateDedup> dedup_;
  bool write_failed_ = false;
};

}  // namespace tenax::sdk
