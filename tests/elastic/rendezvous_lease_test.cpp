// The lease file (tenax/elastic/rendezvous_lease.h): exclusive claims across processes, atomic
// renewals, a keeper that stands down when another node claims a higher term.
#include "tenax/elastic/rendezvous_lease.h"

#include "tenax/core/error.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "support/eventually.h"

namespace tenax::elastic {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class RendezvousLease : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tenax-lease-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static LeaseRecord record(std::int64_t term, const std::string& holder) {
    LeaseRecord r;
    r.term = term;
    r.holder = holder;
    r.endpoint = "tcp://" + holder + ":1234";
    return r;
  }

  fs::path dir_;
};
using ElasticRendezvousLease = RendezvousLease;  // suites are named Elastic* (ctest -L elastic)

TEST_F(ElasticRendezvousLease, NoLeaseReadsAsNoneAndAClaimWritesIt) {
  LeaseFile file(dir_);
  EXPECT_FALSE(file.read().has_value());
  ASSERT_TRUE(file.claim(record(0, "node-a")));
  const auto read = file.read();
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->holder, "node-a");
  EXPECT_EQ(read->term, 0);
  EXPECT_GT(read->renewed_unix_ms, 0);
}

// Exactly one of many processes racing for the same term wins it.
TEST_F(ElasticRendezvousLease, OneOfManyProcessesRacingForATermWinsIt) {
  constexpr int kRacers = 8;
  std::vector<pid_t> pids;
  for (int i = 0; i < kRacers; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const bool won = LeaseFile(dir_).claim(record(3, "node-" + std::to_string(i)));
      ::_exit(won ? 0 : 1);
    }
    pids.push_back(pid);
  }
  int winners = 0;
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0) ++winners;
  }
  EXPECT_EQ(winners, 1);
  const auto read = LeaseFile(dir_).read();
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->term, 3);
  EXPECT_FALSE(LeaseFile(dir_).claim(record(3, "late"))) << "a claimed term was claimed again";
}

TEST_F(ElasticRendezvousLease, ADamagedLeaseReadsAsNone) {
  std::ofstream(dir_ / kLeaseFileName) << "{\"term\": 1, \"holder\": ";
  EXPECT_FALSE(LeaseFile(dir_).read().has_value());
}

TEST_F(ElasticRendezvousLease, AClaimInAnUnwritableDirectoryNamesIt) {
  LeaseFile file(dir_ / "missing");
  try {
    (void)file.claim(record(0, "node-a"));
    FAIL() << "claimed in a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "missing").string()), std::string::npos) << e.what();
  }
}

TEST_F(ElasticRendezvousLease, TheKeeperRenewsAndStandsDownWhenAHigherTermIsClaimed) {
  LeaseFile file(dir_);
  ASSERT_TRUE(file.claim(record(0, "node-a")));
  std::int64_t generation = 7;
  LeaseKeeper keeper(file, *file.read(), milliseconds(20), [&generation] { return generation; });
  ASSERT_TRUE(tenax::testing::eventually([&] { return file.read() && file.read()->beat >= 3; }));
  EXPECT_EQ(file.read()->generation, 7);
  EXPECT_FALSE(keeper.deposed());
  ASSERT_TRUE(file.claim(record(1, "node-b")));
  ASSERT_TRUE(tenax::testing::eventually([&] { return keeper.deposed(); }));
  // The deposed keeper no longer writes: the new holder's record stays.
  const auto after = file.read();
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->holder, "node-b");
}

}  // namespace
}  // namespace tenax::elastic
