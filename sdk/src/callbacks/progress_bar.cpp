#include "tenax/sdk/callbacks/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <utility>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>
#include <string_view>

namespace tenax::sdk {
namespace {

constexpr std::string_view kClearToEndOfLine = "\x1b[K";
constexpr int kBarWidth = 20;

// Keys of a training log entry; a log with other keys (eval_loss, ...) is printed in full.
const std::set<std::string, std::less<>> kTrainingKeys = {"loss", "learning_rate",      "epoch",
                                                          "step", "samples_per_second", "grad_norm"};

std::string format_duration(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[48];
  if (total >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", total / 3600, total / 60 % 60, total % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", total / 60, total % 60);
  }
  return buf;
}

std::string format_value(double value) {
  char buf[48];
  const double magnitude = std::abs(value);
  std::snprintf(buf, sizeof buf, (magnitude != 0 && (magnitude < 1e-3 || magnitude >= 1e6)) ? "%.3e" : "%.4f", value);
  return buf;
}

}  // namespace

ProgressBarCallback::ProgressBarCallback()
    : ProgressBarCallback(std::cerr, ::isatty(STDERR_FILENO) == 1 ? Display::kRedrawInPlace : Display::kLinePerLog) {}

ProgressBarCallback::ProgressBarCallback(std::ostream& out, Display display, Clock clock)
    : out_(out), display_(display), clock_(std::move(clock)) {}

void ProgressBarCallback::on_train_begin(const TrainingArguments&, TrainerState& state, TrainerControl&) {
  if (!state.is_world_process_zero()) return;
  start_time_ = clock_();
  start_step_ = state.global_step;
  started_ = true;
  if (display_ == Display::kRedrawInPlace) redraw(state);
}

void ProgressBarCallback::on_step_end(const TrainingArguments&, TrainerState& state, TrainerControl&) {
  if (!state.is_world_process_zero() || display_ != Display::kRedrawInPlace) return;
  redraw(state);
}

void ProgressBarCallback::on_log(const TrainingArguments&, TrainerState& state, TrainerControl&, const Logs& logs) {
  if (!state.is_world_process_zero()) return;
  if (const auto it = logs.find("loss"); it != logs.end()) loss_ = it->second;
  if (const auto it = logs.find("learning_rate"); it != logs.end()) learning_rate_ = it->second;

  // Evaluation results and other non-training entries: every value, on a line of its own.
  std::string extra;
  for (const auto& [key, value] : logs) {
    if (kTrainingKeys.count(key) == 0) extra += (extra.empty() ? "" : " | ") + key + " " + format_value(value);
  }
  if (display_ == Display::kRedrawInPlace) {
    // An evaluation line replaces the bar, which is then drawn again below it.
    if (!extra.empty())
      out_ << "\r" + std::string(kClearToEndOfLine) + "step " + std::to_string(state.global_step) + " | " + extra +
                  "\n";
    redraw(state);
    return;
  }
  out_ << (extra.empty() ? status_line(state) : "step " + std::to_string(state.global_step) + " | " + extra) + "\n";
  out_.flush();
}

void ProgressBarCallback::on_train_end(const TrainingArguments&, TrainerState& state, TrainerControl&) {
  if (!state.is_world_process_zero() || display_ != Display::kRedrawInPlace) return;
  redraw(state);
  out_ << '\n';
  out_.flush();
}

void ProgressBarCallback::redraw(const TrainerState& state) {
  std::string text = "\r" + std::string(kClearToEndOfLine);
  if (state.max_steps > 0) {
    const double fraction = std::clamp(static_cast<double>(state.global_step) / state.max_steps, 0.0, 1.0);
    const int filled = static_cast<int>(fraction * kBarWidth);
    text += "[" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "] ";
  }
  text += status_line(state);
  out_ << text;  // one write: std::cerr is unbuffered
  out_.flush();
}

std::string ProgressBarCallback::status_line(const TrainerState& state) const {
  std::string line = "step " + std::to_string(state.global_step);
  if (state.max_steps > 0) {
    line += "/" + std::to_string(state.max_steps);
    char percent[16];
    std::snprintf(percent, sizeof percent, " (%d%%)",
                  static_cast<int>(std::floor(100.0 * static_cast<double>(state.global_step) / state.max_steps)));
    line += percent;
  }
  if (loss_) line += " | loss " + format_value(*loss_);
  if (learning_rate_) {
    char lr[32];
    std::snprintf(lr, sizeof lr, "%.3e", *learning_rate_);
    line += std::string(" | lr ") + lr;
  }
  const std::int64_t steps_done = state.global_step - start_step_;
  const double elapsed = started_ ? std::chrono::duration<double>(clock_() - start_time_).count() : 0.0;
  if (steps_done > 0 && elapsed > 0) {
    if (state.train_batch_size > 0) {
      char rate[32];
      std::snprintf(rate, sizeof rate, "%.1f", static_cast<double>(steps_done * state.train_batch_size) / elapsed);
      line += std::string(" | ") + rate + " samples/s";
    }
    if (state.max_steps > 0) {
      line +=
          " | ETA " + format_duration(elapsed / steps_done * static_cast<double>(state.max_steps - state.global_step));
    }
  }
  return line;
}

}  // namespace tenax::sdk
