// Issue 33, "nobody waits on a dead peer": an AbortSignal releases a rank blocked in Gloo — still
// connecting to a peer that never comes, or in a collective with a peer that never answers —
// within milliseconds instead of the call's timeout; and the generation watch raises it when the
// next generation is declared in the job's store.
#include "tenax/elastic/abort_signal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "generation_watch.h"
#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/in_process_recovery.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// A store two "processes" share without sharing a client: InMemoryStore is thread-safe.
class BorrowedStore final : public Store {
 public:
  explicit BorrowedStore(Store& base) : base_(base) {}
  void set(const std::string& key, const std::vector<char>& value) override { base_.set(key, value); }
  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return base_.get(key, timeout);
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return base_.add(key, delta); }
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    base_.wait(keys, timeout);
  }

 private:
  Store& base_;
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A cut shuts this rank's sockets down: its peer's next write fails with EPIPE, which is a
// SIGPIPE unless ignored, as every worker does (WorkerContext, worker_context.cpp). So does
// this test process, whose two "ranks" share it.
const bool kSigpipeIgnored = [] {
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

TEST(ElasticAbortSignal, RaisingRunsTheCutOnceAndALateCutAtOnce) {
  AbortSignal signal;
  int cuts = 0;
  signal.set_cut([&] { ++cuts; });
  EXPECT_FALSE(signal.raised());
  signal.raise("first");
  signal.raise("second");
  EXPECT_EQ(cuts, 1);
  EXPECT_EQ(signal.reason(), "first");
  int late = 0;
  signal.set_cut([&] { ++late; });
  EXPECT_EQ(late, 1) << "a cut set after the signal was raised runs at once";
}

// Rank 0 of 2 waits for rank 1, which died before it published its address.
TEST(ElasticAbortSignal, ReleasesAConnectWaitingForAPeerThatNeverComes) {
  InMemoryStore store;
  GlooOptions options;
  options.timeout = 60s;
  options.abort = std::make_shared<AbortSignal>();
  const auto start = Clock::now();
  std::thread raiser([&] {
    std::this_thread::sleep_for(200ms);
    options.abort->raise("generation 3 was superseded by generation 4");
  });
  try {
    make_gloo_communicator(store, 0, 2, options);
    ADD_FAILURE() << "the connect must fail once the signal is raised";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("superseded by generation 4"), std::string::npos) << e.what();
  }
  raiser.join();
  EXPECT_LT(seconds_since(start), 5.0) << "released by the signal, not by the 60 s timeout";
}

// Both ranks connect; rank 1 stays alive but never enters the barrier rank 0 waits in (a peer
// stuck elsewhere). The signal releases rank 0, and rank 1's next call fails at once too: the
// cut closed rank 0's connections.
TEST(ElasticAbortSignal, ReleasesACollectiveWaitingOnAPeerThatNeverAnswers) {
  InMemoryStore base;
  BorrowedStore store0(base), store1(base);
  GlooOptions options0;
  options0.timeout = 60s;
  options0.abort = std::make_shared<AbortSignal>();
  GlooOptions options1;
  options1.timeout = 60s;
  auto connect1 = std::async(std::launch::async, [&] { return make_gloo_communicator(store1, 1, 2, options1); });
  std::unique_ptr<Communicator> rank0 = make_gloo_communicator(store0, 0, 2, options0);
  std::unique_ptr<Communicator> rank1 = connect1.get();

  const auto start = Clock::now();
  std::thread raiser([&] {
    std::this_thread::sleep_for(200ms);
    options0.abort->raise("generation 7 was superseded by generation 8");
  });
  try {
    rank0->barrier(60s);
    ADD_FAILURE() << "the barrier cannot complete without rank 1";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("superseded by generation 8"), std::string::npos) << e.what();
  }
  raiser.join();
  EXPECT_LT(seconds_since(start), 5.0) << "released by the signal, not by the 60 s timeout";

  const auto peer_start = Clock::now();
  EXPECT_THROW(rank1->barrier(60s), PeerLostError);
  EXPECT_LT(seconds_since(peer_start), 5.0) << "the peer sees the connection close";
}

// Gloo fails the buffers still waiting for their peer's notice when a connection ends, but
// not a receive whose message has begun to arrive nor a send already on the socket: a cut in
// the middle of a large transfer waited out the collective's whole timeout (the next
// generation's peers waiting for this rank meanwhile). Both sides of a transfer, cut mid-way.
TEST(ElasticAbortSignal, ReleasesATransferAlreadyUnderWayOnEitherSide) {
  for (const int cut_rank : {0, 1}) {
    SCOPED_TRACE(cut_rank == 0 ? "the receiver is cut" : "the sender is cut");
    InMemoryStore base;
    BorrowedStore store0(base), store1(base);
    GlooOptions options[2];
    for (GlooOptions& o : options) o.timeout = 60s;
    // Every rank's generation watch raises its own signal; the other's comes once this one's
    // call returned (which is what is measured).
    for (GlooOptions& o : options) o.abort = std::make_shared<AbortSignal>();
    // Large enough that the transfer is still under way when the cut comes, on any machine.
    // Declared before the communicators: Gloo's threads may touch them until those are gone.
    std::vector<char> data[2] = {std::vector<char>(std::size_t{1} << 30, 0),
                                 std::vector<char>(std::size_t{1} << 30, 1)};
    auto connect1 = std::async(std::launch::async, [&] { return make_gloo_communicator(store1, 1, 2, options[1]); });
    std::unique_ptr<Communicator> comm[2] = {make_gloo_communicator(store0, 0, 2, options[0]), connect1.get()};
    std::future<void> other = std::async(std::launch::async, [&] {
      try {
        comm[1 - cut_rank]->broadcast(data[1 - cut_rank].data(), data[1 - cut_rank].size(), /*root=*/1, 60s);
      } catch (const Error&) {
        // its peer's cut ends it too, sooner or later; not what this test measures
      }
    });
    std::thread raiser([&] {
      std::this_thread::sleep_for(50ms);
      options[cut_rank].abort->raise("generation 3 was superseded by generation 4");
    });
    const auto start = Clock::now();
    bool released = false;
    try {
      comm[cut_rank]->broadcast(data[cut_rank].data(), data[cut_rank].size(), /*root=*/1, 60s);
    } catch (const PeerLostError& e) {
      released = std::string(e.what()).find("superseded by generation 4") != std::string::npos;
      EXPECT_TRUE(released) << e.what();
    }
    const double waited = seconds_since(start);
    raiser.join();
    options[1 - cut_rank].abort->raise("generation 3 was superseded by generation 4");
    other.wait();
    ASSERT_TRUE(released) << "the transfer of 1 GiB finished within 50 ms; the cut came too late to test";
    EXPECT_LT(waited, 5.0) << "released by the signal, not by the 60 s timeout";
  }
}

TEST(ElasticAbortSignal, ACommunicatorOfARaisedSignalRefusesEveryCall) {
  InMemoryStore base;
  BorrowedStore store0(base), store1(base);
  GlooOptions options0;
  options0.abort = std::make_shared<AbortSignal>();
  GlooOptions options1;
  auto connect1 = std::async(std::launch::async, [&] { return make_gloo_communicator(store1, 1, 2, options1); });
  std::unique_ptr<Communicator> rank0 = make_gloo_communicator(store0, 0, 2, options0);
  std::unique_ptr<Communicator> rank1 = connect1.get();
  options0.abort->raise("a newer generation");
  float x = 1.0f;
  try {
    rank0->allreduce(&x, 1, ElementType::kFloat32, ReduceOp::kSum, 60s);
    ADD_FAILURE() << "refused after the cut";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("a newer generation"), std::string::npos) << e.what();
  }
}

TEST(ElasticGenerationWatch, RaisesTheSignalWhenTheNextGenerationIsDeclared) {
  InMemoryStore base;
  detail::GenerationWatch watch([&base] { return std::make_unique<BorrowedStore>(base); });
  std::shared_ptr<AbortSignal> three = watch.watch(3);
  std::this_thread::sleep_for(2 * detail::GenerationWatch::kPark);
  EXPECT_FALSE(three->raised()) << "nothing declared yet";

  // Handing out a newer generation moves the watch on (generation 3's signal may still be raised
  // by a wait already parked: harmless, 3 is superseded all the same).
  std::shared_ptr<AbortSignal> five = watch.watch(5);
  base.set(declared_key(4), {'5'});
  std::this_thread::sleep_for(2 * detail::GenerationWatch::kPark);
  EXPECT_FALSE(five->raised()) << "generation 6 is not declared";

  base.set(kLatestKey, {'6'});
  const auto start = Clock::now();
  base.set(declared_key(6), {'6'});
  while (!five->raised() && seconds_since(start) < 5.0) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(five->raised());
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_NE(five->reason().find("generation 5 was superseded by generation 6"), std::string::npos) << five->reason();
}

}  // namespace
}  // namespace tenax::elastic
