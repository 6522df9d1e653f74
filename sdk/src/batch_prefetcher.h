// Loads the next steps' batches on background threads while the current step computes
// (TrainingArguments::dataloader_num_workers threads, dataloader_prefetch_factor steps ahead per
// thread), so that reading, decoding, augmenting and collating samples do not set the step rate.
//
// A step's batches are a pure function of (its sample indices, its epoch) over an immutable
// dataset, so a request is its own key: take() uses a prefetched result only for the same
// indices and epoch and drops the ones queued before it. After an in-process recovery, an
// elastic change of world size or a replayed step the queue is stale and is simply not used —
// no invalidation to forget. With 0 threads take() loads on the caller's thread: one path.
//
// What runs on the threads (the dataset's get_for_epoch() and the collator) must be safe to call
// while the training thread computes — the SDK's datasets are — and must not draw from torch's
// global generator, which the training thread's dropout uses: the two would interleave by timing.
// Thread-safety: prefetch(), take() and waited_seconds() from one thread (the training loop).
//
//   BatchPrefetcher prefetcher(load, /*threads=*/2, /*depth=*/4);
//   auto batches = prefetcher.take({indices, epoch});   // prefetched, or loaded now
//   prefetcher.prefetch({next_indices, next_epoch});      // starts on a free thread
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tenax/sdk/data.h"

namespace tenax::sdk::detail {

class BatchPrefetcher {
 public:
  /// One step's samples on this rank.
  struct Request {
    std::vector<std::int64_t> indices;
    std::int64_t epoch = 0;
    bool operator==(const Request& other) const { return epoch == other.epoch && indices == other.indices; }
  };
  using Load = std::function<std::vector<Batch>(const Request&)>;

  /// `threads` 0: no thread, prefetch() does nothing. `depth`: the most steps queued ahead.
  BatchPrefetcher(Load load, int threads, int depth);
  /// Stops the threads after the load each is running.
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  /// Queues `request` to load on a free thread, unless it is queued already or `depth` are.
  void prefetch(const Request& request);
  /// The batches of `request`: the prefetched ones (waiting for them if they are still
  /// loading), or loaded now on this thread. Drops what was queued before it; a queue that
  /// does not hold it is dropped whole. Rethrows the load's exception.
  std::vector<Batch> take(const Request& request);
  /// How many requests are queued after the last one taken: the loop asks only for the steps
  /// beyond them. (A queued request that has gone stale costs nothing but a load: take()
  /// compares whole requests.)
  std::size_t queued() const { return queued_.size(); }
  /// The seconds take() has waited for batches in all: the data path's share of the loop.
  double waited_seconds() const { return waited_seconds_; }

 private:
  struct Job {
    Request request;
    std::promise<std::vector<Batch>> promise;
    std::future<std::vector<Batch>> result;
  };

  void run_loop();

  Load load_;
  std::size_t depth_;
  std::deque<std::shared_ptr<Job>> queued_;  // the training thread's view, in request order
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> unstarted_;  // not started yet; guarded by mutex_
  bool stopping_ = false;                       // guarded by mutex_
  std::vector<std::thread> threads_;
  double waited_seconds_ = 0;
};

}  // namespace tenax::sdk::detail
