#include "batch_prefetcher.h"

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tenax::sdk::detail {
namespace {

using Request = BatchPrefetcher::Request;

// A load that records where and how often each request ran; its batch holds the first index
// and the epoch, so a test can tell which request a result answers.
struct Recorder {
  std::mutex mutex;
  std::map<std::int64_t, int> loads;  // first index -> times loaded
  std::map<std::int64_t, std::thread::id> thread_of;
  std::promise<void> gate;  // a load of index `gated` waits for it
  std::shared_future<void> opened = gate.get_future().share();
  std::int64_t gated = -1;

  BatchPrefetcher::Load load() {
    return [this](const Request& r) {
      if (r.indices.front() == gated) opened.wait();
      {
        std::lock_guard<std::mutex> lock(mutex);
        ++loads[r.indices.front()];
        thread_of[r.indices.front()] = std::this_thread::get_id();
      }
      Batch b;
      b.inputs = torch::tensor({r.indices.front(), r.epoch});
      return std::vector<Batch>{b};
    };
  }
  std::thread::id thread(std::int64_t first) {
    std::lock_guard<std::mutex> lock(mutex);
    return thread_of.at(first);
  }
  int times(std::int64_t first) {
    std::lock_guard<std::mutex> lock(mutex);
    return loads.count(first) ? loads[first] : 0;
  }
};

Request step(std::int64_t first, std::int64_t epoch = 0) { return {{first, first + 1}, epoch}; }

std::int64_t first_of(const std::vector<Batch>& batches) { return batches.at(0).inputs[0].item<std::int64_t>(); }

TEST(SdkBatchPrefetcher, APrefetchedStepIsLoadedOnceOnAnotherThreadAndTaken) {
  Recorder rec;
  BatchPrefetcher prefetcher(rec.load(), /*threads=*/2, /*depth=*/4);
  prefetcher.prefetch(step(10));
  prefetcher.prefetch(step(20));
  prefetcher.prefetch(step(10));  // queued already: not again
  // take() loads a step no thread has started on its own thread: wait until both have run.
  for (int i = 0; i < 500 && (rec.times(10) == 0 || rec.times(20) == 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(first_of(prefetcher.take(step(10))), 10);
  EXPECT_EQ(first_of(prefetcher.take(step(20))), 20);
  EXPECT_EQ(rec.times(10), 1);
  EXPECT_EQ(rec.times(20), 1);
  EXPECT_NE(rec.thread(10), std::this_thread::get_id());
  EXPECT_NE(rec.thread(20), std::this_thread::get_id());
}

TEST(SdkBatchPrefetcher, WithoutThreadsEveryStepLoadsOnTheCallersThreadWhenTaken) {
  Recorder rec;
  BatchPrefetcher prefetcher(rec.load(), /*threads=*/0, /*depth=*/4);
  prefetcher.prefetch(step(1));
  EXPECT_EQ(rec.times(1), 0);
  EXPECT_EQ(first_of(prefetcher.take(step(1))), 1);
  EXPECT_EQ(rec.thread(1), std::this_thread::get_id());
}

// After an in-process recovery the loop asks for other samples (another rank, another world):
// what was queued is not used, whatever it holds.
TEST(SdkBatchPrefetcher, ARequestThatWasNotQueuedIsLoadedNowAndTheStaleQueueIsDropped) {
  Recorder rec;
  BatchPrefetcher prefetcher(rec.load(), 1, 4);
  prefetcher.prefetch(step(1));
  prefetcher.prefetch(step(2));
  EXPECT_EQ(first_of(prefetcher.take(step(7))), 7);
  EXPECT_EQ(rec.thread(7), std::this_thread::get_id());
  // Step 2 was dropped: asked for now, it is loaded again on this thread, not taken from the queue.
  EXPECT_EQ(first_of(prefetcher.take(step(2))), 2);
  EXPECT_EQ(rec.thread(2), std::this_thread::get_id());
}

TEST(SdkBatchPrefetcher, TheEpochIsPartOfTheKey) {
  Recorder rec;
  BatchPrefetcher prefetcher(rec.load(), 1, 4);
  prefetcher.prefetch(step(5, /*epoch=*/0));
  const auto batches = prefetcher.take(step(5, /*epoch=*/1));
  EXPECT_EQ(batches.at(0).inputs[1].item<std::int64_t>(), 1);
}

TEST(SdkBatchPrefetcher, TakingALaterStepDropsTheEarlierOnesAndTheDepthBoundsTheQueue) {
  Recorder rec;
  rec.gated = 1;  // the only thread is held in step 1's load
  BatchPrefetcher prefetcher(rec.load(), 1, /*depth=*/2);
  prefetcher.prefetch(step(1));
  prefetcher.prefetch(step(2));
  prefetcher.prefetch(step(3));  // beyond the depth: ignored
  // Step 2 has not started (the thread is busy with 1): it is loaded here rather than waited for.
  EXPECT_EQ(first_of(prefetcher.take(step(2))), 2);
  EXPECT_EQ(rec.thread(2), std::this_thread::get_id());
  EXPECT_EQ(rec.times(3), 0);
  rec.gate.set_value();
  // Step 1 was dropped; the prefetcher's destructor waits for its load to end.
}

TEST(SdkBatchPrefetcher, ALoadsExceptionIsRethrownByTake) {
  BatchPrefetcher prefetcher(
      [](const Request& r) -> std::vector<Batch> {
        throw std::runtime_error("sample " + std::to_string(r.indices.front()) + " is unreadable");
      },
      1, 2);
  prefetcher.prefetch(step(4));
  try {
    prefetcher.take(step(4));
    FAIL() << "take() returned";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "sample 4 is unreadable");
  }
}

TEST(SdkBatchPrefetcher, WaitedSecondsCountTheTimeTakeBlocked) {
  BatchPrefetcher prefetcher(
      [](const Request&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return std::vector<Batch>{};
      },
      0, 1);
  prefetcher.take(step(1));
  EXPECT_GE(prefetcher.waited_seconds(), 0.04);
}

// The training loop asks only for the steps beyond queued(): a hit leaves the steps after it
// queued, a miss (a recovered rank asking for other indices) leaves nothing.
TEST(SdkBatchPrefetcher, QueuedCountsTheStepsAfterTheLastTakenAndAMissEmptiesIt) {
  Recorder rec;
  BatchPrefetcher prefetcher(rec.load(), /*threads=*/1, /*depth=*/3);
  EXPECT_EQ(prefetcher.queued(), 0u);
  for (std::int64_t s : {10, 20, 30, 40}) prefetcher.prefetch(step(s));  // depth 3: 40 is not queued
  EXPECT_EQ(prefetcher.queued(), 3u);
  EXPECT_EQ(first_of(prefetcher.take(step(10))), 10);
  EXPECT_EQ(prefetcher.queued(), 2u);
  EXPECT_EQ(first_of(prefetcher.take(step(99))), 99);
  EXPECT_EQ(prefetcher.queued(), 0u);
  EXPECT_EQ(rec.times(40), 0);
}

}  // namespace
}  // namespace tenax::sdk::detail
