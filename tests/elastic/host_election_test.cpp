// Failover decisions from the lease (tenax/elastic/host_election.h), on a made-up clock.
#include "tenax/elastic/host_election.h"

#include <gtest/gtest.h>

#include "tenax/core/error.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;
using Clock = HostElection::Clock;
using Action = HostElection::Action;

constexpr milliseconds kLease{5000};
const Clock::time_point kStart = Clock::time_point{} + std::chrono::hours(1);
constexpr std::int64_t kWallStart = 1'800'000'000'000;

LeaseRecord lease(std::int64_t term, std::int64_t beat, std::string holder = "node-000000",
                  std::int64_t renewed = kWallStart) {
  LeaseRecord r;
  r.term = term;
  r.holder = std::move(holder);
  r.endpoint = "tcp://host-" + r.holder + ":4000" + std::to_string(term);
  r.beat = beat;
  r.generation = 3;
  r.renewed_unix_ms = renewed;
  return r;
}

// Observes a lease renewed every 500 ms from kStart up to `until` (beats 1, 2, ...).
void watch_renewals(HostElection& e, milliseconds until, std::int64_t term = 0) {
  std::int64_t beat = 0;
  for (milliseconds t{0}; t <= until; t += milliseconds(500)) {
    e.observe(lease(term, ++beat, "node-000000", kWallStart + t.count()), kStart + t, kWallStart + t.count());
  }
}

TEST(ElasticHostElection, TheFirstNodeClaimsTermZeroWhenThereIsNoLease) {
  HostElection first("node-000000", HostElectionOptions(0, kLease));
  first.observe(std::nullopt, kStart, kWallStart);
  const auto d = first.decide(kStart);
  EXPECT_EQ(d.action, Action::kClaim);
  EXPECT_EQ(d.term, 0);
}

TEST(ElasticHostElection, OtherNodesWaitForTheFirstNodesLeaseBeforeClaimingThemselves) {
  HostElection second("node-000001", HostElectionOptions(1, kLease));
  second.observe(std::nullopt, kStart, kWallStart);
  EXPECT_EQ(second.decide(kStart + milliseconds(5900)).action, Action::kWait);
  EXPECT_EQ(second.decide(kStart + milliseconds(6000)).action, Action::kClaim);  // 5 s + 1 x 1 s stagger
}

TEST(ElasticHostElection, ALeaseThatIsRenewedIsFollowedAndNeverClaimed) {
  HostElection e("node-000001", HostElectionOptions(1, kLease));
  watch_renewals(e, milliseconds(60000));
  const auto d = e.decide(kStart + milliseconds(60400));
  EXPECT_EQ(d.action, Action::kConnect);
  EXPECT_EQ(d.lease.endpoint, "tcp://host-node-000000:40000");
}

// Issue 12, point 3: the holder dies; the survivors claim the next term, the lowest position of
// the node list first.
TEST(ElasticHostElection, ADeadHoldersLeaseIsClaimedLowestPositionFirst) {
  HostElection second("node-000001", HostElectionOptions(1, kLease));
  HostElection third("node-000002", HostElectionOptions(2, kLease));
  watch_renewals(second, milliseconds(2000));
  watch_renewals(third, milliseconds(2000));
  // The last renewal was seen at 2.0 s; the holder is silent from then on.
  const auto at = [](int ms) { return kStart + milliseconds(ms); };
  EXPECT_EQ(second.decide(at(7900)).action, Action::kConnect);
  const auto claim = second.decide(at(8000));  // 2 s + 5 s lease + 1 s stagger
  EXPECT_EQ(claim.action, Action::kClaim);
  EXPECT_EQ(claim.term, 1);
  EXPECT_NE(claim.reason.find("was not renewed for 6000 ms"), std::string::npos) << claim.reason;
  EXPECT_EQ(third.decide(at(8000)).action, Action::kConnect) << "the third node claimed before the second";
  EXPECT_EQ(third.decide(at(9000)).action, Action::kClaim);
  EXPECT_EQ(second.highest_generation(), 3);
}

// Once the new holder renews term 1, the other survivors follow it instead of claiming.
TEST(ElasticHostElection, ANewTermIsFollowedByTheOthers) {
  HostElection third("node-000002", HostElectionOptions(2, kLease));
  watch_renewals(third, milliseconds(2000));
  third.observe(lease(1, 1, "node-000001", kWallStart + 8000), kStart + milliseconds(8000), kWallStart + 8000);
  const auto d = third.decide(kStart + milliseconds(9000));
  EXPECT_EQ(d.action, Action::kConnect);
  EXPECT_EQ(d.lease.holder, "node-000001");
  EXPECT_EQ(d.lease.term, 1);
}

// A new agent (a requeued job) finds a lease last renewed long ago: no need to watch it die.
TEST(ElasticHostElection, ALongDeadLeaseFoundAtStartIsClaimedAtOnce) {
  HostElection first("node-000000", HostElectionOptions(0, kLease));
  first.observe(lease(4, 77, "node-000001", kWallStart - 3600'000), kStart, kWallStart);
  const auto d = first.decide(kStart);
  EXPECT_EQ(d.action, Action::kClaim);
  EXPECT_EQ(d.term, 5);
  // The others wait their turn, so that the lowest live position claims.
  HostElection second("node-000001", HostElectionOptions(1, kLease));
  second.observe(lease(4, 77, "node-000001", kWallStart - 3600'000), kStart, kWallStart);
  EXPECT_NE(second.decide(kStart + milliseconds(900)).action, Action::kClaim);
  EXPECT_EQ(second.decide(kStart + milliseconds(1000)).action, Action::kClaim);
}

// A lease seen for the first time with a recent wall-clock stamp is given the benefit of the
// doubt until it fails to move for the lease timeout.
TEST(ElasticHostElection, ARecentLeaseFoundAtStartIsFollowedUntilItStopsMoving) {
  HostElection first("node-000000", HostElectionOptions(0, kLease));
  first.observe(lease(2, 9, "node-000001", kWallStart - 1000), kStart, kWallStart);
  EXPECT_EQ(first.decide(kStart + milliseconds(4900)).action, Action::kConnect);
  EXPECT_EQ(first.decide(kStart + milliseconds(5000)).action, Action::kClaim);
}

TEST(ElasticHostElection, BadOptionsAreRefusedNamingThem) {
  EXPECT_THROW(HostElectionOptions(-1, kLease), ConfigError);
  EXPECT_THROW(HostElectionOptions(0, milliseconds(0)), ConfigError);
}

}  // namespace
}  // namespace tenax::elastic
