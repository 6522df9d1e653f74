#include "batch_prefetcher.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace tenax::sdk::detail {

BatchPrefetcher::BatchPrefetcher(Load load, int threads, int depth)
    : load_(std::move(load)), depth_(static_cast<std::size_t>(std::max(depth, 1))) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run_loop(); });
}

BatchPrefetcher::~BatchPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    unstarted_.clear();
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void BatchPrefetcher::run_loop() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !unstarted_.empty(); });
      if (stopping_) return;
      job = std::move(unstarted_.front());
      unstarted_.pop_front();
    }
    try {
      job->promise.set_value(load_(job->request));
    } catch (...) {
      job->promise.set_exception(std::current_exception());
    }
  }
}

void BatchPrefetcher::prefetch(const Request& request) {
  if (threads_.empty() || queued_.size() >= depth_) return;
  for (const auto& job : queued_) {
    if (job->request == request) return;
  }
  auto job = std::make_shared<Job>();
  job->request = request;
  job->result = job->promise.get_future();
  queued_.push_back(job);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    unstarted_.push_back(std::move(job));
  }
  wake_.notify_one();
}

std::vector<Batch> BatchPrefetcher::take(const Request& request) {
  const auto started = std::chrono::steady_clock::now();
  const auto hit = std::find_if(queued_.begin(), queued_.end(),
                                [&](const std::shared_ptr<Job>& job) { return job->request == request; });
  // What was queued before the request (all of it on a miss) will not be asked for: a stale
  // job not yet started is taken off the threads' list; one running finishes unused. The
  // request's own job, when no thread has started it, is loaded here rather than waited for.
  std::shared_ptr<Job> job = hit == queued_.end() ? nullptr : *hit;
  bool started_by_thread = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto last = hit == queued_.end() ? queued_.end() : std::next(hit);
    for (auto it = queued_.begin(); it != last; ++it) {
      const auto at = std::find(unstarted_.begin(), unstarted_.end(), *it);
      if (at != unstarted_.end()) {
        unstarted_.erase(at);
      } else if (*it == job) {
        started_by_thread = true;
      }
    }
    queued_.erase(queued_.begin(), last);
  }
  std::vector<Batch> batches = started_by_thread ? job->result.get() : load_(request);
  waited_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return batches;
}

}  // namespace tenax::sdk::detail
