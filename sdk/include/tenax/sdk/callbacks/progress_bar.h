// ProgressBarCallback: rank 0's view of training — step/total, the last logged loss and
// learning rate, samples/s and the ETA (both measured since on_train_begin).
//
// On a terminal the line is redrawn in place after every step ('\r' + clear to end of line)
// and evaluation results are printed as lines of their own above it; elsewhere (a file, a
// pipe, a batch job's log) it prints one line per on_log and never a '\r'. Ranks other than 0
// print nothing.
// Thread-safety: training thread only. The output stream is borrowed and must outlive the
// callback.
//
//   trainer.add_callback(std::make_shared<tenax::sdk::ProgressBarCallback>());  // stderr
//   std::ostringstream out;
//   tenax::sdk::ProgressBarCallback lines(out, tenax::sdk::ProgressBarCallback::Display::kLinePerLog);
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {

class ProgressBarCallback : public TrainerCallback {
 public:
  enum class Display {
    kRedrawInPlace,  ///< a terminal: one line redrawn with '\r' after every step
    kLinePerLog,     ///< not a terminal: one plain line per on_log
  };
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  /// Writes to stderr, redrawing in place when stderr is a terminal (isatty(2)).
  ProgressBarCallback();
  /// Writes to `out` (borrowed) in the given display; `clock` measures rates and the ETA.
  ProgressBarCallback(std::ostream& out, Display display, Clock clock = std::chrono::steady_clock::now);

  void on_train_begin(const TrainingArguments& args, TrainerState& state, TrainerControl& control) override;
  void on_step_end(const TrainingArguments& args, TrainerState& state, TrainerControl& control) override;
  void on_log(const TrainingArguments& args, TrainerState& state, TrainerControl& control, const Logs& logs) override;
  void on_train_end(const TrainingArguments& args, TrainerState& state, TrainerControl& control) override;

  Display display() const { return display_; }

 private:
  std::string status_line(const TrainerState& state) const;
  void redraw(const TrainerState& state);

  std::ostream& out_;
  Display display_;
  Clock clock_;
  std::chrono::steady_clock::time_point start_time_{};
  std::int64_t start_step_ = 0;
  bool started_ = false;
  std::optional<double> loss_;
  std::optional<double> learning_rate_;
};

}  // namespace tenax::sdk
