#include "tenax/elastic/abort_signal.h"

#include <utility>

namespace tenax::elastic {

void AbortSignal::raise(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (raised_) return;
  raised_ = true;
  reason_ = reason;
  // Under the lock: set_cut() cannot swap the cut out while it runs.
  if (cut_) cut_();
}

bool AbortSignal::raised() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return raised_;
}

std::string AbortSignal::reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reason_;
}

void AbortSignal::set_cut(std::function<void()> cut) {
  std::lock_guard<std::mutex> lock(mutex_);
  cut_ = std::move(cut);
  if (raised_ && cut_) cut_();
}

}  // namespace tenax::elastic
