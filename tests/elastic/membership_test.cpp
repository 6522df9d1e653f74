// The rendezvous service's decisions as a pure state machine (elastic/src/membership.h): every
// case runs on a made-up clock, with no socket and no sleep, so each is deterministic.
#include "membership.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tenax::elastic::detail {
namespace {

using std::chrono::milliseconds;
using Clock = Membership::Clock;

const HeartbeatOptions kHeartbeat = HeartbeatOptions().interval(milliseconds(100)).liveness(5);  // 500 ms

RendezvousOptions options(int min_nodes, int max_nodes) {
  return RendezvousOptions(min_nodes, max_nodes)
      .heartbeat(kHeartbeat)
      .last_call(milliseconds(200))
      .join_timeout(milliseconds(3000));
}

// Drives a Membership as the service thread does: a tick every tick_interval(), and a
// heartbeat every interval from each node that is "alive" in the test's script.
class Driver {
 public:
  explicit Driver(RendezvousOptions o, MembershipHooks hooks = {})
      : membership(o, "tcp://store:1", std::move(hooks)), tick_(membership.tick_interval()) {}

  Outbox join(const std::string& node, std::int64_t last_generation = -1, int workers = 1) {
    // Each node offers a port of its own (MASTER_PORT if it becomes node rank 0).
    const std::int64_t port = 20000 + static_cast<std::int64_t>(std::hash<std::string>{}(node) % 10000);
    return take(membership.handle(route(node), JoinMsg{node, node + ".host", workers, last_generation, port}, now));
  }
  Outbox beat(const std::string& node, std::int64_t generation) {
    return take(membership.handle(route(node), HeartbeatMsg{node, generation}, now));
  }
  // The node's agent asks for a restart (one of its workers died).
  Outbox ask_restart(const std::string& node, std::int64_t generation, const std::string& reason) {
    return take(membership.handle(route(node), RestartMsg{node, generation, reason}, now));
  }
  // Lets `duration` pass in ticks; `alive` nodes heartbeat for `generation` every interval.
  void run_for(milliseconds duration, const std::vector<std::string>& alive, std::int64_t generation) {
    const auto end = now + duration;
    while (now < end) {
      now += tick_;
      if (now >= next_beat_) {
        for (const auto& node : alive) beat(node, generation);
        next_beat_ = now + kHeartbeat.interval();
      }
      take(membership.tick(now));
    }
  }
  // The service itself does not run for `duration` (its host is SIGSTOPped): no tick, no message.
  void stall_for(milliseconds duration) { now += duration; }

  // Everything sent so far to `node`, in order.
  std::vector<ServiceMessage> sent_to(const std::string& node) const {
    std::vector<ServiceMessage> out;
    for (const auto& o : log_) {
      if (o.routing_id == route(node)) out.push_back(o.message);
    }
    return out;
  }
  template <typename T>
  std::vector<T> sent_to_as(const std::string& node) const {
    std::vector<T> out;
    for (const auto& m : sent_to(node)) {
      if (const T* t = std::get_if<T>(&m)) out.push_back(*t);
    }
    return out;
  }

  Membership membership;
  Clock::time_point now = Clock::time_point{} + std::chrono::hours(1);

 private:
  static std::string route(const std::string& node) { return "route/" + node; }
  Outbox take(Outbox out) {
    log_.insert(log_.end(), out.begin(), out.end());
    return out;
  }

  milliseconds tick_;
  Clock::time_point next_beat_{};
  Outbox log_;
};

TEST(ElasticMembership, TwoNodesFormAGenerationWithRanksInNodeIdOrder) {
  Driver d(options(2, 2));
  d.join("node-b", -1, 2);
  d.join("node-a", -1, 3);
  const auto a = d.sent_to_as<AssignMsg>("node-a");
  const auto b = d.sent_to_as<AssignMsg>("node-b");
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0].assignment.generation, 0);
  EXPECT_EQ(a[0].assignment.node_rank, 0);
  EXPECT_EQ(a[0].assignment.rank_offset, 0);
  EXPECT_EQ(b[0].assignment.node_rank, 1);
  EXPECT_EQ(b[0].assignment.rank_offset, 3);
  EXPECT_EQ(b[0].assignment.world_size, 5);
  EXPECT_EQ(a[0].assignment.master_host, "node-a.host");
  // Every node gets node rank 0's port: the workers' own store is on rank 0.
  const int port_a = 20000 + static_cast<int>(std::hash<std::string>{}("node-a") % 10000);
  EXPECT_EQ(a[0].assignment.master_port, port_a);
  EXPECT_EQ(b[0].assignment.master_port, port_a);
  EXPECT_EQ(a[0].assignment.store_endpoint, "tcp://store:1");
}

TEST(ElasticMembership, ASilentMemberEndsTheGenerationOnceItsHeartbeatsExpire) {
  Driver d(options(2, 2));
  d.join("node-a");
  d.join("node-b");
  d.run_for(milliseconds(400), {"node-a", "node-b"}, 0);
  EXPECT_FALSE(d.membership.snapshot().restart_requested);
  d.run_for(milliseconds(700), {"node-a"}, 0);  // node-b falls silent
  const RendezvousSnapshot s = d.membership.snapshot();
  EXPECT_TRUE(s.restart_requested);
  EXPECT_NE(s.restart_reason.find("node 'node-b' (node-b.host) missed heartbeats"), std::string::npos)
      << s.restart_reason;
  EXPECT_EQ(s.nodes_lost, 1u);
  const auto pulses = d.sent_to_as<PulseMsg>("node-a");
  ASSERT_FALSE(pulses.empty());
  EXPECT_EQ(pulses.back().state, PulseState::kRestart);
}

// Issue 12, point 2: a node declared dead that comes back is told to join again, and joins the
// next generation with the survivor; generation numbers never repeat.
TEST(ElasticMembership, ANodeDeclaredDeadThatComesBackJoinsTheNextGeneration) {
  Driver d(options(2, 2));
  d.join("node-a");
  d.join("node-b");
  d.run_for(milliseconds(1000), {"node-a"}, 0);  // node-b paused: declared dead
  ASSERT_TRUE(d.membership.snapshot().restart_requested);
  d.join("node-a", 0);  // the survivor re-joins at once
  EXPECT_EQ(d.membership.snapshot().generation, 0) << "a generation formed without MIN nodes";

  // node-b wakes up and heartbeats its old generation: it learns that it must join again.
  d.beat("node-b", 0);
  const auto pulses = d.sent_to_as<PulseMsg>("node-b");
  ASSERT_FALSE(pulses.empty());
  EXPECT_EQ(pulses.back().state, PulseState::kUnknownNode);
  d.join("node-b", 0);
  const auto assigned = d.sent_to_as<AssignMsg>("node-b");
  ASSERT_EQ(assigned.size(), 2u);
  EXPECT_EQ(assigned.back().assignment.generation, 1);
  EXPECT_EQ(assigned.back().assignment.num_nodes, 2);
  EXPECT_EQ(d.membership.snapshot().members, (std::vector<std::string>{"node-a", "node-b"}));
}

// A rendezvous host that was itself paused (SIGSTOP, swapping) must not declare the nodes dead
// for the silence that was its own.
TEST(ElasticMembership, AStalledServiceDoesNotHoldItsOwnSilenceAgainstTheNodes) {
  Driver d(options(2, 2));
  d.join("node-a");
  d.join("node-b");
  d.run_for(milliseconds(300), {"node-a", "node-b"}, 0);
  d.stall_for(milliseconds(5000));  // ten times the expiry
  d.beat("node-a", 0);              // the first queued message, as the pump reads it
  d.run_for(milliseconds(300), {"node-a", "node-b"}, 0);
  const RendezvousSnapshot s = d.membership.snapshot();
  EXPECT_FALSE(s.restart_requested) << s.restart_reason;
  EXPECT_EQ(s.nodes_lost, 0u);
  // ...but a node that stays silent after the stall is still found out.
  d.run_for(milliseconds(700), {"node-a"}, 0);
  EXPECT_TRUE(d.membership.snapshot().restart_requested);
}

// A new rendezvous host (failover, or a restarted one) numbers on above every generation a
// joiner has seen.
TEST(ElasticMembership, ATakeoverHostNumbersAboveEveryGenerationItsJoinersSaw) {
  Driver d(options(1, 2));
  d.membership.number_above(4);
  d.join("node-b", 6);
  d.run_for(milliseconds(300), {}, -1);
  const auto assigned = d.sent_to_as<AssignMsg>("node-b");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].assignment.generation, 7);
}

// Issue 12, point 4: a generation goes out only once the job's fence has moved to it; a fence
// that is already further (another host formed that number) moves the numbering above it.
TEST(ElasticMembership, AGenerationIsNumberedByTheFenceBeforeItsAssignGoesOut) {
  std::vector<std::int64_t> claims;
  MembershipHooks hooks;
  hooks.claim_generation = [&claims](std::int64_t g) -> StatusOr<std::int64_t> {
    claims.push_back(g);
    return g + 10;  // the fence had moved on
  };
  Driver d(options(1, 1), hooks);
  d.join("node-a");
  const auto assigned = d.sent_to_as<AssignMsg>("node-a");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(claims, (std::vector<std::int64_t>{0}));
  EXPECT_EQ(assigned[0].assignment.generation, 10);
  EXPECT_EQ(assigned[0].assignment.store_prefix, "gen/10/");
}

TEST(ElasticMembership, AFenceThatRefusesFailsTheRoundWithItsReason) {
  MembershipHooks hooks;
  hooks.claim_generation = [](std::int64_t) -> StatusOr<std::int64_t> {
    return Status(StatusCode::kFailedPrecondition, "the fence directory is not writable");
  };
  Driver d(options(1, 1), hooks);
  d.join("node-a");
  EXPECT_TRUE(d.sent_to_as<AssignMsg>("node-a").empty());
  const auto failed = d.sent_to_as<FailedMsg>("node-a");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].message.find("the fence directory is not writable"), std::string::npos) << failed[0].message;
}

TEST(ElasticMembership, ARoundShortOfTheMinimumFailsAtTheJoinTimeoutNamingWhoJoined) {
  Driver d(options(2, 3));
  d.join("node-a");
  d.run_for(milliseconds(2900), {"node-a"}, -1);
  EXPECT_TRUE(d.sent_to_as<FailedMsg>("node-a").empty());
  d.run_for(milliseconds(200), {"node-a"}, -1);
  const auto failed = d.sent_to_as<FailedMsg>("node-a");
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_NE(failed[0].message.find("1 node(s) joined within the join timeout of 3000 ms, fewer than the minimum of 2"),
            std::string::npos)
      << failed[0].message;
  EXPECT_NE(failed[0].message.find("node-a (node-a.host)"), std::string::npos) << failed[0].message;
}

TEST(ElasticMembership, TheLastCallWaitsForMoreNodesThenFormsWithThoseThatCame) {
  Driver d(options(1, 3));
  d.join("node-a");
  d.run_for(milliseconds(100), {"node-a"}, -1);
  d.join("node-c");
  EXPECT_TRUE(d.sent_to_as<AssignMsg>("node-a").empty()) << "formed before the last call ended";
  d.run_for(milliseconds(200), {"node-a", "node-c"}, -1);
  const auto assigned = d.sent_to_as<AssignMsg>("node-c");
  ASSERT_EQ(assigned.size(), 1u);
  EXPECT_EQ(assigned[0].assignment.num_nodes, 2);
}

// A re-form does not wait for the last call: once every live member of the ending generation has
// joined again, the next generation forms (a lost node is not waited for).
TEST(ElasticMembership, AReformClosesAsSoonAsEveryLiveMemberHasJoinedAgain) {
  Driver d(options(1, 2));
  d.join("node-a");
  d.join("node-b");
  d.run_for(milliseconds(1000), {"node-a"}, 0);  // node-b lost: declared dead, restart asked
  ASSERT_TRUE(d.membership.snapshot().restart_requested);
  d.join("node-a", 0);
  d.run_for(milliseconds(20), {"node-a"}, 0);  // one tick or two, far inside the 200 ms last call
  const auto assigned = d.sent_to_as<AssignMsg>("node-a");
  ASSERT_EQ(assigned.size(), 2u) << "the re-form waited for the last call";
  EXPECT_EQ(assigned.back().assignment.generation, 1);
  EXPECT_EQ(assigned.back().assignment.num_nodes, 1);
}

// ...but while a live member has not joined again, the round waits for it.
TEST(ElasticMembership, AReformWaitsForALiveMemberThatHasNotJoinedYet) {
  Driver d(options(1, 2));
  d.join("node-a");
  d.join("node-b");
  d.run_for(milliseconds(200), {"node-a", "node-b"}, 0);
  d.ask_restart("node-b", 0, "a worker of node-b died");
  d.join("node-a", 0);
  d.run_for(milliseconds(300), {"node-a", "node-b"}, 0);  // past the last call; node-b alive, not joined
  EXPECT_EQ(d.sent_to_as<AssignMsg>("node-a").size(), 1u) << "formed without a live member";
  d.join("node-b", 0);
  d.run_for(milliseconds(20), {"node-a", "node-b"}, 0);
  const auto assigned = d.sent_to_as<AssignMsg>("node-b");
  ASSERT_EQ(assigned.size(), 2u);
  EXPECT_EQ(assigned.back().assignment.num_nodes, 2);
}

// The measurement behind the heartbeat defaults: the worst silence of a node that stayed alive.
TEST(ElasticMembership, TheLongestSilenceOfALiveNodeIsMeasured) {
  Driver d(options(2, 2));
  d.join("node-a");
  d.join("node-b");
  d.run_for(milliseconds(300), {"node-a", "node-b"}, 0);
  d.run_for(milliseconds(400), {"node-a"}, 0);  // node-b late, but within the 500 ms expiry
  d.beat("node-b", 0);
  const RendezvousSnapshot s = d.membership.snapshot();
  EXPECT_FALSE(s.restart_requested);
  EXPECT_GE(s.longest_silence_ms, 400);
  EXPECT_LT(s.longest_silence_ms, 500);
}

}  // namespace
}  // namespace tenax::elastic::detail
