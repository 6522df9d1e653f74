// Private: one file operation at a time on a thread of its own, so that the caller copies and
// hashes one buffer while the device drains the other (region_writer's O_DIRECT writes).
// Thread-safety: one caller thread; start() and wait() alternate.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace tenax::storage::detail {

class BackgroundIo {
 public:
  BackgroundIo() : thread_([this] { loop(); }) {}
  /// Finishes the operation in flight (its buffers must outlive this object), then joins.
  ~BackgroundIo() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  BackgroundIo(const BackgroundIo&) = delete;
  BackgroundIo& operator=(const BackgroundIo&) = delete;

  /// Starts `op` (returns 0 or an errno). The previous operation must have been waited for.
  void start(std::function<long()> op) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      op_ = std::move(op);
      pending_ = true;
    }
    wake_.notify_all();
  }
  /// Waits for the operation in flight; what it returned (0 when none was in flight).
  long wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return !pending_; });
    return std::exchange(result_, 0);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stopping_ || (pending_ && op_); });
      if (!op_) return;  // stopping, nothing in flight
      std::function<long()> op = std::exchange(op_, nullptr);
      lock.unlock();
      const long result = op();
      lock.lock();
      result_ = result;
      pending_ = false;
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  std::function<long()> op_;  // started, not yet taken by the thread
  bool pending_ = false;      // started and not finished
  bool stopping_ = false;
  long result_ = 0;
  std::thread thread_;  // last: starts after the members it uses exist
};

}  // namespace tenax::storage::detail
