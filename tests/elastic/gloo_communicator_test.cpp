#include "tenax/elastic/gloo_communicator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/kv_service.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using tenax::testing::run_ranks;

class ElasticGloo : public ::testing::TestWithParam<int> {
 protected:
  int world() const { return GetParam(); }
};

TEST_P(ElasticGloo, ReportsRankAndSize) {
  std::vector<int> seen(static_cast<size_t>(world()), -1);
  run_ranks(world(), [&](Communicator& comm) {
    EXPECT_EQ(comm.size(), world());
    seen[static_cast<size_t>(comm.rank())] = comm.rank();
  });
  for (int r = 0; r < world(); ++r) EXPECT_EQ(seen[static_cast<size_t>(r)], r);
}

TEST_P(ElasticGloo, AllreduceFloat32SumMaxMin) {
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

TEST_P(ElasticGloo, AllreduceFloat64SumAndMax) {
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

TEST_P(ElasticGloo, AllreduceInt64SumMaxMin) {
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

TEST_P(ElasticGloo, AllreduceUInt8Max) {
  const int n = world();
  run_ranks(n, [&](Communicator& comm) {
    std::vector<std::uint8_t> flags{static_cast<std::uint8_t>(comm.rank() == n - 1 ? 1 : 0), 0};
    comm.allreduce(flags.data(), flags.size(), ElementType::kUInt8, ReduceOp::kMax);
    EXPECT_EQ(flags, (std::vector<std::uint8_t>{1, 0}));
  });
}

TEST_P(ElasticGloo, BroadcastFromTheLastRank) {
  const int n = world();
  const int root = n - 1;  // non-zero whenever the world has more than one rank
  run_ranks(n, [&](Communicator& comm) {
    std::string payload = comm.rank() == root ? std::string("from the root, 29 bytes long.") : std::string(29, '?');
    comm.broadcast(payload.data(), payload.size(), root);
    EXPECT_EQ(payload, "from the root, 29 bytes long.");
  });
}

TEST_P(ElasticGloo, AllgatherInRankOrder) {
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

TEST_P(ElasticGloo, AllgatherStringsOfDifferentLengthsIncludingEmpty) {
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

TEST_P(ElasticGloo, BarrierWaitsForEveryRank) {
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

TEST_P(ElasticGloo, AllreduceIsBitIdenticalAcrossRanksAndRuns) {
  const int n = world();
  // Over Gloo's 1 MiB segment size, so the ring splits the buffer into several chunks.
  const std::size_t count = 300000;
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

TEST_P(ElasticGloo, AbortMakesLaterCallsFailFast) {
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

std::string world_name(const ::testing::TestParamInfo<int>& info) { return "world" + std::to_string(info.param); }

INSTANTIATE_TEST_SUITE_P(WorldSizes, ElasticGloo, ::testing::Values(1, 2, 3, 4), world_name);

TEST(ElasticGlooRendezvous, RunsOverTheKvServiceWithOneClientPerRank) {
  KvService service;
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  constexpr int kWorld = 2;
  std::vector<std::future<std::vector<double>>> results;
  for (int r = 0; r < kWorld; ++r) {
    results.push_back(std::async(std::launch::async, [&endpoint, r] {
      auto base = connect_store(endpoint, seconds(10));
      PrefixStore store(generation_prefix(5), *base);
      GlooOptions options;
      options.timeout = seconds(30);
      auto comm = make_gloo_communicator(store, r, kWorld, options);
      std::vector<double> v{1.0 + r, 10.0 * r};
      comm->allreduce(v.data(), v.size(), ElementType::kFloat64, ReduceOp::kSum);
      comm->barrier();
      return v;
    }));
  }
  for (auto& f : results) EXPECT_EQ(f.get(), (std::vector<double>{3.0, 10.0}));
}

TEST(ElasticGlooRendezvous, APeerThatNeverArrivesTimesOut) {
  InMemoryStore store;
  GlooOptions options;
  options.timeout = milliseconds(300);
  try {
    make_gloo_communicator(store, 0, 2, options);  // rank 1 never comes
    FAIL() << "the rendezvous must time out";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 0 of 2"), std::string::npos) << e.what();
  }
}

TEST(ElasticGlooRendezvous, RankOutsideTheWorldIsAConfigError) {
  InMemoryStore store;
  EXPECT_THROW(make_gloo_communicator(store, 2, 2, GlooOptions{}), ConfigError);
  EXPECT_THROW(make_gloo_communicator(store, -1, 2, GlooOptions{}), ConfigError);
  EXPECT_THROW(make_gloo_communicator(store, 0, 0, GlooOptions{}), ConfigError);
}

TEST(ElasticGlooFailure, APeerThatDiesMidCollectiveIsReportedNotAHang) {
  InMemoryStore store;
  GlooOptions options;
  options.timeout = seconds(30);
  std::thread peer([&] {
    auto comm = make_gloo_communicator(store, 1, 2, options);
    comm->barrier();
    comm.reset();  // dies: closes its sockets without taking part in the allreduce
  });
  auto comm = make_gloo_communicator(store, 0, 2, options);
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

TEST(ElasticGlooFailure, AbortFromAnotherThreadMakesTheNextCallFail) {
  InMemoryStore store;
  std::thread peer([&] {
    auto comm = make_gloo_communicator(store, 1, 2, GlooOptions{});
    comm->barrier();
  });
  auto comm = make_gloo_communicator(store, 0, 2, GlooOptions{});
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

}  // namespace
}  // namespace tenax::elastic
