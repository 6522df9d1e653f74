#include "ordered_pipeline.h"

#include <string>
#include <utility>

#include <fmt/format.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

OrderedPipeline::OrderedPipeline(std::function<void(std::size_t)> job, bool threaded) : job_(std::move(job)) {
  if (threaded) thread_ = std::thread([this] { run_loop(); });
}

OrderedPipeline::~OrderedPipeline() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void OrderedPipeline::run_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    changed_.wait(lock, [&] { return stopping_ || (next_ < ready_.size() && ready_[next_]); });
    run_ready_jobs(lock);
  }
}

void OrderedPipeline::run_ready_jobs(std::unique_lock<std::mutex>& lock) {
  while (!stopping_ && next_ < ready_.size() && ready_[next_]) {
    const std::size_t index = next_;
    running_ = true;
    lock.unlock();
    std::exception_ptr failure;
    try {
      job_(index);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    running_ = false;
    // After a failure the communicator is unusable: the later jobs would only wait for it.
    next_ = failure ? ready_.size() : index + 1;
    if (failure && !error_) error_ = failure;
    changed_.notify_all();
  }
}

void OrderedPipeline::drain(std::unique_lock<std::mutex>& lock) {
  changed_.wait(lock, [&] { return !running_; });
  ready_.clear();
  next_ = 0;
  error_ = nullptr;
}

void OrderedPipeline::begin_round(std::size_t count) {
  std::unique_lock<std::mutex> lock(mutex_);
  drain(lock);
  ready_.assign(count, 0);
}

void OrderedPipeline::mark_ready(std::size_t index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index >= ready_.size()) {
      throw Error(fmt::format("OrderedPipeline::mark_ready: job {} of a round of {}", index, ready_.size()));
    }
    ready_[index] = 1;
  }
  changed_.notify_all();
}

bool OrderedPipeline::is_ready(std::size_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return index < ready_.size() && ready_[index];
}

void OrderedPipeline::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (char& ready : ready_) ready = 1;
  if (thread_.joinable()) {
    changed_.notify_all();
    changed_.wait(lock, [&] { return next_ >= ready_.size() && !running_; });
  } else {
    run_ready_jobs(lock);
  }
  std::exception_ptr failure = std::exchange(error_, nullptr);
  ready_.clear();
  next_ = 0;
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tenax::sdk
