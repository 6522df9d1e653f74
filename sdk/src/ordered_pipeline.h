// Runs the jobs of a round, 0..n-1, strictly in index order, each as soon as it and every job
// before it have been marked ready. GradSync's buckets become ready in whatever order autograd
// finishes their gradients, but every rank must issue its collectives in one order; this keeps
// the order and lets the early buckets' allreduce run while backward goes on.
// Threaded: the jobs run on one background thread (DDP's overlap). Not threaded (a communicator
// that may only be called from the training thread, e.g. MPI below MPI_THREAD_SERIALIZED): the
// jobs run in wait(), on the caller's thread, in the same order — one path either way.
// After a job throws, the round's later jobs are skipped and wait() rethrows the first error.
// Thread-safety: mark_ready() from any thread; begin_round() and wait() from the owner's thread.
//
//   OrderedPipeline pipeline([&](std::size_t i) { allreduce(bucket[i]); }, /*threaded=*/true);
//   pipeline.begin_round(n);  ... pipeline.mark_ready(k) (any order) ...  pipeline.wait();
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tenax::sdk {

class OrderedPipeline {
 public:
  OrderedPipeline(std::function<void(std::size_t)> job, bool threaded);
  /// Waits for a job in flight (a collective ends by its timeout or the communicator's abort).
  ~OrderedPipeline();
  OrderedPipeline(const OrderedPipeline&) = delete;
  OrderedPipeline& operator=(const OrderedPipeline&) = delete;

  /// Starts a round of `count` jobs. A round left open (its backward threw) is drained first:
  /// its job in flight finishes, the rest are dropped, its error is forgotten.
  void begin_round(std::size_t count);
  /// Job `index` of the open round may run (once the jobs before it have). Idempotent.
  void mark_ready(std::size_t index);
  bool is_ready(std::size_t index) const;
  /// Marks every job ready and blocks until all ran; rethrows the first job's exception.
  void wait();

 private:
  void run_loop();
  // Runs the ready jobs in order while the lock is released around each; returns with it held.
  void run_ready_jobs(std::unique_lock<std::mutex>& lock);
  void drain(std::unique_lock<std::mutex>& lock);

  std::function<void(std::size_t)> job_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<char> ready_;
  std::size_t next_ = 0;  // the next job to run
  bool running_ = false;  // a job is executing (outside the lock)
  bool stopping_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // only when threaded
};

}  // namespace tenax::sdk
