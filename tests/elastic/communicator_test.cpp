// The CPU communicators, Gloo and Tenax's TCP ring, held to one contract (communicator.h): every
// test runs on both, at world sizes 1 to 4, ranks as threads over an in-memory store.
#include "tenax/elastic/communicator.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"
#include "tenax/elastic/backend.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/tcp_communicator.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using tenax::testing::run_ranks;

// Builds one rank's communicator of `backend` (gloo or tcp) over `store`.
std::unique_ptr<Communicator> make(Backend backend, Store& store, int rank, int size, milliseconds timeout,
                                   std::shared_ptr<AbortSignal> abort = nullptr) {
  CommunicatorOptions options;
  options.timeout = timeout;
  options.abort = std::move(abort);
  return make_communicator(backend, store, rank, size, options);
}

std::string backend_label(Backend backend) { return backend_name(backend); }

class ElasticCommunicator : public ::testing::TestWithParam<std::tuple<Backend, int>> {
 protected:
  Backend backend() const { return std::get<0>(GetParam()); }
  int world() const { return std::get<1>(GetParam()); }
  void run_ranks(int n, const std::function<void(Communicator&)>& fn) const {
    tenax::testing::run_ranks(n, fn, backend());
  }
};

TEST_P(ElasticCommunicator, ReportsRankAndSize) {
  std::vector<int> seen(static_cast<size_t>(world()), -1);
  run_ranks(world(), [&](Communicator& comm) {
    EXPECT_EQ(comm.size(), world());
    seen[static_cast<size_t>(comm.rank())] = comm.rank();
  });
  for (int r = 0; r < world(); ++r) EXPECT_EQ(seen[static_cast<size_t>(r)], r);
}

TEST_P(ElasticCommunicator, AllreduceFloat32SumMaxMin) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    const std::size_t count = 1000;
    std::vector<float> sum(count), max(count), min(count);
    for (std::size_t i = 0; i < count; ++i) {
      sum[i] = 0.5f * static_cast<float>(r + 1) + static_cast<float>(i);
      max[i] = min[i] = static_cast<float>((r * 7 + static_cast<int>(i)) % n) - 1.5f;
    }
    comm.allreduce(sum.data(), count, ElementType::kFloat32, ReduceOp::kSum);
    comm.allreduce(max.data(), count, ElementType::kFloat32, ReduceOp::kMax);
    comm.allreduce(min.data(), count, ElementType::kFloat32, ReduceOp::kMin);
    const float rank_sum = 0.5f * static_cast<float>(n * (n + 1) / 2);
    for (std::size_t i = 0; i < count; ++i) {
      ASSERT_EQ(sum[i], rank_sum + static_cast<float>(n) * static_cast<float>(i)) << "i=" << i;
      // (r*7 + i) % n over all r covers every residue when gcd(7, n) = 1 (n <= 4).
      ASSERT_EQ(max[i], static_cast<float>(n - 1) - 1.5f) << "i=" << i;
      ASSERT_EQ(min[i], -1.5f) << "i=" << i;
    }
  });
}

TEST_P(ElasticCommunicator, AllreduceFloat64SumAndMax) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<double> sum{1.25 * r, -2.0, 1e300 * (r == 0 ? 1 : 0)};
    std::vector<double> max{static_cast<double>(r), -static_cast<double>(r), 0.125};
    comm.allreduce(sum.data(), sum.size(), ElementType::kFloat64, ReduceOp::kSum);
    comm.allreduce(max.data(), max.size(), ElementType::kFloat64, ReduceOp::kMax);
    EXPECT_EQ(sum[0], 1.25 * n * (n - 1) / 2);
    EXPECT_EQ(sum[1], -2.0 * n);
    EXPECT_EQ(sum[2], 1e300);
    EXPECT_EQ(max[0], n - 1);
    EXPECT_EQ(max[1], 0.0);
    EXPECT_EQ(max[2], 0.125);
  });
}

TEST_P(ElasticCommunicator, AllreduceInt64SumMaxMin) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    const std::int64_t r = comm.rank();
    const std::int64_t big = std::int64_t{1} << 40;
    std::vector<std::int64_t> sum{r, big + r, -r};
    std::vector<std::int64_t> max{r * 10, -r};
    std::vector<std::int64_t> min{r * 10, -r};
    comm.allreduce(sum.data(), sum.size(), ElementType::kInt64, ReduceOp::kSum);
    comm.allreduce(max.data(), max.size(), ElementType::kInt64, ReduceOp::kMax);
    comm.allreduce(min.data(), min.size(), ElementType::kInt64, ReduceOp::kMin);
    const std::int64_t ranks = std::int64_t{n} * (n - 1) / 2;
    EXPECT_EQ(sum, (std::vector<std::int64_t>{ranks, big * n + ranks, -ranks}));
    EXPECT_EQ(max, (std::vector<std::int64_t>{10 * (n - 1), 0}));
    EXPECT_EQ(min, (std::vector<std::int64_t>{0, -(n - 1)}));
  });
}

TEST_P(ElasticCommunicator, AllreduceUInt8Max) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    std::vector<std::uint8_t> flags{static_cast<std::uint8_t>(comm.rank() == n - 1 ? 1 : 0), 0};
    comm.allreduce(flags.data(), flags.size(), ElementType::kUInt8, ReduceOp::kMax);
    EXPECT_EQ(flags, (std::vector<std::uint8_t>{1, 0}));
  });
}

TEST_P(ElasticCommunicator, BroadcastFromTheLastRank) {
  const int n = world();
  const int root = n - 1;  // non-zero whenever the world has more than one rank
  run_ranks(n, [&](Communicator& comm) {
    std::string payload = comm.rank() == root ? std::string("from the root, 29 bytes long.") : std::string(29, '?');
    comm.broadcast(payload.data(), payload.size(), root);
    EXPECT_EQ(payload, "from the root, 29 bytes long.");
  });
}

TEST_P(ElasticCommunicator, AllgatherInRankOrder) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    const std::int64_t mine[2] = {comm.rank(), 100 + comm.rank()};
    std::vector<std::int64_t> all(static_cast<size_t>(2 * n), -1);
    comm.allgather(mine, all.data(), sizeof(mine));
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(all[static_cast<size_t>(2 * r)], r);
      EXPECT_EQ(all[static_cast<size_t>(2 * r + 1)], 100 + r);
    }
  });
}

TEST_P(ElasticCommunicator, AllgatherStringsOfDifferentLengthsIncludingEmpty) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    // Rank 0 sends "", the others r*3 copies of a letter, one with an embedded NUL.
    std::string mine(static_cast<size_t>(r * 3), static_cast<char>('a' + r));
    if (r == 1) mine[1] = '\0';
    const auto all = allgather_strings(comm, mine);
    ASSERT_EQ(all.size(), static_cast<size_t>(n));
    for (int q = 0; q < n; ++q) {
      std::string expected(static_cast<size_t>(q * 3), static_cast<char>('a' + q));
      if (q == 1) expected[1] = '\0';
      EXPECT_EQ(all[static_cast<size_t>(q)], expected) << "rank " << q;
    }
    const auto empty = allgather_strings(comm, "");
    EXPECT_EQ(empty, std::vector<std::string>(static_cast<size_t>(n)));
  });
}

TEST_P(ElasticCommunicator, BarrierWaitsForEveryRank) {
  const int n = world();
  std::atomic<int> arrived{0};
  run_ranks(n, [&](Communicator& comm) {
    arrived.fetch_add(1);
    comm.barrier(seconds(30));
    EXPECT_EQ(arrived.load(), n) << "rank " << comm.rank() << " left the barrier early";
  });
}

// Values of very different magnitudes, so that any change of summation order changes bits.
std::vector<float> noisy_input(int rank, std::size_t count) {
  std::mt19937 rng(static_cast<unsigned>(1234 + rank));
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-20, 20);
  std::vector<float> v(count);
  for (auto& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

TEST_P(ElasticCommunicator, AllreduceIsBitIdenticalAcrossRanksAndRuns) {
  const int n = world();
  // Over Gloo's 1 MiB segment size, so the ring splits the buffer into several chunks; a count
  // no world size above 1 divides, so the TCP ring's segments differ in length.
  const std::size_t count = 300001;
  auto run_once = [&] {
    std::vector<std::vector<float>> results(static_cast<size_t>(n));
    run_ranks(n, [&](Communicator& comm) {
      auto data = noisy_input(comm.rank(), count);
      comm.allreduce(data.data(), count, ElementType::kFloat32, ReduceOp::kSum);
      results[static_cast<size_t>(comm.rank())] = std::move(data);
    });
    return results;
  };
  const auto first = run_once();
  const auto second = run_once();
  for (int r = 0; r < n; ++r) {
    const auto& a = first[static_cast<size_t>(r)];
    ASSERT_EQ(a.size(), count);
    EXPECT_EQ(std::memcmp(a.data(), first[0].data(), count * sizeof(float)), 0) << "rank " << r << " vs rank 0";
    EXPECT_EQ(std::memcmp(a.data(), second[static_cast<size_t>(r)].data(), count * sizeof(float)), 0)
        << "rank " << r << ": run 1 vs run 2";
  }
}

TEST_P(ElasticCommunicator, AbortMakesLaterCallsFailFast) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    comm.barrier();
    comm.abort();
    comm.abort();  // idempotent
    EXPECT_THROW(comm.barrier(seconds(30)), PeerLostError);
    int x = 1;
    EXPECT_THROW(comm.allreduce(&x, 0, ElementType::kUInt8, ReduceOp::kSum, seconds(30)), PeerLostError);
  });
}

TEST_P(ElasticCommunicator, AllreduceOfFewerElementsThanRanks) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    std::vector<std::int64_t> one{comm.rank() + 1};
    comm.allreduce(one.data(), one.size(), ElementType::kInt64, ReduceOp::kSum);
    EXPECT_EQ(one[0], std::int64_t{n} * (n + 1) / 2);
    std::vector<float> two{static_cast<float>(comm.rank()), -static_cast<float>(comm.rank())};
    comm.allreduce(two.data(), two.size(), ElementType::kFloat32, ReduceOp::kMin);
    EXPECT_EQ(two, (std::vector<float>{0.0f, -static_cast<float>(n - 1)}));
  });
}

TEST_P(ElasticCommunicator, LargeBroadcastFromEveryRootArrivesWhole) {
  const int n = world();
  const std::size_t bytes = (5u << 20) + 3;  // several socket buffers: the ring relays as it receives
  run_ranks(n, [&](Communicator& comm) {
    for (int root = 0; root < n; ++root) {
      std::vector<std::uint8_t> data(bytes, 0);
      if (comm.rank() == root) {
        for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::uint8_t>((i * 131 + root) & 0xff);
      }
      comm.broadcast(data.data(), bytes, root);
      for (std::size_t i = 0; i < bytes; i += 4093) {
        ASSERT_EQ(data[i], static_cast<std::uint8_t>((i * 131 + root) & 0xff)) << "root " << root << " byte " << i;
      }
      ASSERT_EQ(data[bytes - 1], static_cast<std::uint8_t>(((bytes - 1) * 131 + root) & 0xff));
    }
  });
}

std::string param_name(const ::testing::TestParamInfo<std::tuple<Backend, int>>& info) {
  return backend_label(std::get<0>(info.param)) + "_world" + std::to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(CpuBackends, ElasticCommunicator,
                         ::testing::Combine(::testing::Values(Backend::kGloo, Backend::kTcp),
                                            ::testing::Values(1, 2, 3, 4)),
                         param_name);

class ElasticCommunicatorFailure : public ::testing::TestWithParam<Backend> {
 protected:
  Backend backend() const { return GetParam(); }
};

std::string backend_param_name(const ::testing::TestParamInfo<Backend>& info) { return backend_label(info.param); }

TEST_P(ElasticCommunicatorFailure, RendezvousRunsOverTheKvServiceWithOneClientPerRank) {
  KvService service;
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  constexpr int kWorld = 2;
  std::vector<std::future<std::vector<double>>> results;
  for (int r = 0; r < kWorld; ++r) {
    results.push_back(std::async(std::launch::async, [&endpoint, r, backend = backend()] {
      auto base = connect_store(endpoint, seconds(10));
      PrefixStore store(generation_prefix(5), *base);
      auto comm = make(backend, store, r, kWorld, seconds(30));
      std::vector<double> v{1.0 + r, 10.0 * r};
      comm->allreduce(v.data(), v.size(), ElementType::kFloat64, ReduceOp::kSum);
      comm->barrier();
      return v;
    }));
  }
  for (auto& f : results) EXPECT_EQ(f.get(), (std::vector<double>{3.0, 10.0}));
}

TEST_P(ElasticCommunicatorFailure, RendezvousAPeerThatNeverArrivesTimesOut) {
  InMemoryStore store;
  try {
    make(backend(), store, 0, 2, milliseconds(300));  // rank 1 never comes
    FAIL() << "the rendezvous must time out";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2"), std::string::npos) << e.what();
  }
}

TEST_P(ElasticCommunicatorFailure, RendezvousRankOutsideTheWorldIsAConfigError) {
  InMemoryStore store;
  EXPECT_THROW(make(backend(), store, 2, 2, seconds(1)), ConfigError);
  EXPECT_THROW(make(backend(), store, -1, 2, seconds(1)), ConfigError);
  EXPECT_THROW(make(backend(), store, 0, 0, seconds(1)), ConfigError);
  EXPECT_THROW(make(backend(), store, 0, 2, milliseconds(0)), ConfigError);
}

TEST_P(ElasticCommunicatorFailure, APeerThatDiesMidCollectiveIsReportedNotAHang) {
  InMemoryStore store;
  std::thread peer([&] {
    auto comm = make(backend(), store, 1, 2, seconds(30));
    comm->barrier();
    comm.reset();  // dies: closes its sockets without taking part in the allreduce
  });
  auto comm = make(backend(), store, 0, 2, seconds(30));
  comm->barrier();
  std::vector<float> data(1024, 1.0f);
  bool reported = false;
  try {
    comm->allreduce(data.data(), data.size(), ElementType::kFloat32, ReduceOp::kSum, milliseconds(2000));
  } catch (const PeerLostError& e) {
    reported = std::string(e.what()).find("rank 0 of 2") != std::string::npos;
  } catch (const TimeoutError& e) {
    reported = std::string(e.what()).find("rank 0 of 2") != std::string::npos;
  }
  peer.join();
  EXPECT_TRUE(reported);
  // After a failure the communicator is unusable and says so at once.
  EXPECT_THROW(comm->barrier(seconds(30)), PeerLostError);
}

TEST_P(ElasticCommunicatorFailure, AbortFromAnotherThreadMakesTheNextCallFail) {
  InMemoryStore store;
  std::thread peer([&] {
    auto comm = make(backend(), store, 1, 2, seconds(30));
    comm->barrier();
  });
  auto comm = make(backend(), store, 0, 2, seconds(30));
  comm->barrier();
  peer.join();
  std::thread aborter([&] { comm->abort(); });
  aborter.join();
  try {
    comm->barrier(seconds(30));
    FAIL() << "an aborted communicator must refuse collectives";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("aborted"), std::string::npos) << e.what();
  }
}

// A rank blocked on a peer that has not called is released by the abort signal at once, not at
// its timeout; the peer, calling afterwards, finds the connection ended instead of waiting.
TEST_P(ElasticCommunicatorFailure, TheAbortSignalReleasesACallInFlightAndThePeer) {
  InMemoryStore store;
  auto signal = std::make_shared<AbortSignal>();
  std::promise<void> released;
  std::string peer_error;
  std::chrono::steady_clock::duration peer_waited{};
  std::thread peer([&] {
    auto comm = make(backend(), store, 1, 2, seconds(30));
    released.get_future().wait();
    std::vector<float> data(1 << 18, 1.0f);
    const auto started = std::chrono::steady_clock::now();
    try {
      comm->allreduce(data.data(), data.size(), ElementType::kFloat32, ReduceOp::kSum, seconds(30));
    } catch (const Error& e) {
      peer_error = e.what();
    }
    peer_waited = std::chrono::steady_clock::now() - started;
  });
  auto comm = make(backend(), store, 0, 2, seconds(30), signal);
  const auto started = std::chrono::steady_clock::now();
  std::thread raiser([&] {
    std::this_thread::sleep_for(milliseconds(300));
    signal->raise("rank 3 was lost (test)");
  });
  std::vector<float> data(1 << 18, 1.0f);
  try {
    comm->allreduce(data.data(), data.size(), ElementType::kFloat32, ReduceOp::kSum, seconds(30));
    ADD_FAILURE() << "the call must fail once the signal is raised";
  } catch (const PeerLostError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 3 was lost (test)"), std::string::npos) << e.what();
  }
  const auto waited = std::chrono::steady_clock::now() - started;
  released.set_value();
  raiser.join();
  peer.join();
  EXPECT_LT(waited, seconds(10)) << "the abort did not release the call";
  EXPECT_FALSE(peer_error.empty()) << "the peer's call should fail on the ended connection";
  EXPECT_LT(peer_waited, seconds(10)) << "the peer waited out its timeout: " << peer_error;
}

TEST_P(ElasticCommunicatorFailure, APeerThatNeverCallsIsATimeoutNamingTheRank) {
  InMemoryStore store;
  std::promise<void> done;
  std::thread peer([&] {
    auto comm = make(backend(), store, 1, 2, seconds(30));
    done.get_future().wait();  // connected, then silent
  });
  auto comm = make(backend(), store, 0, 2, seconds(30));
  std::int64_t x = 1;
  try {
    comm->allreduce(&x, 1, ElementType::kInt64, ReduceOp::kSum, milliseconds(300));
    ADD_FAILURE() << "the call must time out";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2"), std::string::npos) << e.what();
  } catch (const PeerLostError& e) {
    ADD_FAILURE() << "a silent peer is a timeout, not a loss: " << e.what();
  }
  done.set_value();
  peer.join();
  EXPECT_THROW(comm->barrier(seconds(1)), PeerLostError) << "unusable after a failure";
}

INSTANTIATE_TEST_SUITE_P(CpuBackends, ElasticCommunicatorFailure, ::testing::Values(Backend::kGloo, Backend::kTcp),
                         backend_param_name);

// A plain TCP connection to the port rank `rank` published under tcp/rank_<rank> in `store`.
UniqueFd connect_to_published(Store& store, int rank) {
  const auto value = store.get("tcp/rank_" + std::to_string(rank), seconds(30));
  std::string host;
  int port = 0;
  std::istringstream(std::string(value.begin(), value.end())) >> host >> port;
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0) << std::strerror(errno);
  return fd;
}

// Forms a 2-rank TCP ring with `timeout` while `stranger_fn` (started first, given the store)
// uses rank 0's port; rank 1 starts only once the stranger fulfils the promise. `done` turns true
// once both ranks have finished, before the stranger is joined. Returns both ranks' sums of 1 + 2.
using Stranger = std::function<void(Store&, std::promise<void>& in, const std::atomic<bool>& done)>;
std::vector<std::int64_t> form_beside(const Stranger& stranger_fn, milliseconds timeout) {
  InMemoryStore store;
  std::promise<void> stranger_in;
  std::future<void> in = stranger_in.get_future();
  std::atomic<bool> done{false};
  std::thread stranger([&] { stranger_fn(store, stranger_in, done); });
  std::vector<std::int64_t> sums(2, 0);
  std::thread rank1([&] {
    in.wait();
    try {
      auto comm = make(Backend::kTcp, store, 1, 2, timeout);
      std::int64_t v = 2;
      comm->allreduce(&v, 1, ElementType::kInt64, ReduceOp::kSum);
      sums[1] = v;
    } catch (const Error&) {
      // Rank 0's outcome is the test's; rank 1 fails when rank 0 does.
    }
  });
  const auto finish = [&] {
    rank1.join();
    done.store(true);
    stranger.join();
  };
  try {
    auto comm = make(Backend::kTcp, store, 0, 2, timeout);
    std::int64_t v = 1;
    comm->allreduce(&v, 1, ElementType::kInt64, ReduceOp::kSum);
    sums[0] = v;
  } catch (...) {
    finish();
    throw;
  }
  finish();
  return sums;
}

// The TCP ring's own promise: a connection that is not the previous rank's (no token, a stale
// generation's rank) is dropped, and the ring still forms.
TEST(ElasticTcpCommunicator, AStrangerOnThePortIsDroppedAndTheRingForms) {
  const auto sums = form_beside(
      [](Store& store, std::promise<void>& in, const std::atomic<bool>& done) {
        UniqueFd fd = connect_to_published(store, 0);
        const char junk[24] = "not a Tenax rank";
        [[maybe_unused]] const auto sent = ::send(fd.get(), junk, sizeof junk, MSG_NOSIGNAL);
        in.set_value();
        while (!done.load()) std::this_thread::sleep_for(milliseconds(10));
      },
      seconds(30));
  EXPECT_EQ(sums, (std::vector<std::int64_t>{3, 3}));
}

// A stranger that connects first, sends part of a hello and then stays silent with the connection
// open (a port scanner, a half-open connection of a stale generation) must not hold up the
// previous rank's hello until the deadline: the ring forms long before it.
TEST(ElasticTcpCommunicator, ASilentStrangerOnThePortDoesNotDelayTheRing) {
  const auto start = std::chrono::steady_clock::now();
  const auto sums = form_beside(
      [](Store& store, std::promise<void>& in, const std::atomic<bool>& done) {
        UniqueFd fd = connect_to_published(store, 0);
        const char part[3] = {'T', 'N', 'A'};
        [[maybe_unused]] const auto sent = ::send(fd.get(), part, sizeof part, MSG_NOSIGNAL);
        in.set_value();
        while (!done.load()) std::this_thread::sleep_for(milliseconds(10));  // silent, open
      },
      seconds(10));
  EXPECT_EQ(sums, (std::vector<std::int64_t>{3, 3}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(5)) << "the silent stranger held the ring up";
}

TEST(ElasticTcpCommunicator, AnUnusableAddressIsARendezvousErrorNamingIt) {
  InMemoryStore store;
  CommunicatorOptions options;
  options.hostname = "192.0.2.1";  // TEST-NET-1: not an address of this machine
  options.timeout = seconds(5);
  try {
    make_tcp_communicator(store, 0, 2, options);
    FAIL() << "listening on a foreign address must fail";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find("192.0.2.1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tenax::elastic
