// RendezvousService + RendezvousClient: N agents as threads in one process over real ZeroMQ on
// tcp://127.0.0.1:0. Heartbeats run at 100 ms x 5 (expiry 500 ms) so that deaths are seen
// quickly; bounds on detection are stated relative to that configuration.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "support/eventually.h"
#include "tenax/core/error.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/rendezvous_client.h"
#include "tenax/elastic/rendezvous_service.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const HeartbeatOptions kFastHeartbeat = HeartbeatOptions().interval(milliseconds(100)).liveness(5);
constexpr milliseconds kServiceTimeout{1200};

RendezvousOptions fast_options(int min_nodes, int max_nodes) {
  return RendezvousOptions(min_nodes, max_nodes)
      .last_call(milliseconds(200))
      .join_timeout(seconds(5))
      .heartbeat(kFastHeartbeat);
}

long long ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

using tenax::testing::eventually;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(ElasticRendezvousOptions, InvalidValuesNameTheOption) {
  try {
    (void)RendezvousOptions(0, 1);
    FAIL() << "min_nodes 0 must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("min_nodes=0"), std::string::npos) << e.what();
  }
  try {
    (void)RendezvousOptions(3, 2);
    FAIL() << "max_nodes below min_nodes must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("max_nodes=2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(HeartbeatOptions().liveness(1), ConfigError);
  EXPECT_THROW(HeartbeatOptions().interval(milliseconds(1)), ConfigError);
  EXPECT_THROW(RendezvousOptions(1, 1).join_timeout(milliseconds(0)), ConfigError);
  EXPECT_THROW(RendezvousClientOptions("", "h", 1), ConfigError);
  EXPECT_THROW(RendezvousClientOptions("n", "h", 0), ConfigError);
  // The client refuses a service timeout that is not beyond one heartbeat expiry.
  auto options = RendezvousClientOptions("n", "h", 1).service_timeout(milliseconds(2500));
  try {
    RendezvousClient client("tcp://127.0.0.1:1", options);
    FAIL() << "service_timeout == interval x liveness must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("service_timeout=2500ms"), std::string::npos) << e.what();
  }
  EXPECT_EQ(RendezvousOptions(1, 2).last_call(milliseconds(5)), RendezvousOptions(1, 2).last_call(milliseconds(5)));
  EXPECT_NE(RendezvousOptions(1, 2), RendezvousOptions(1, 3));
}

TEST(ElasticRendezvousOptions, DefaultsDetectADeadPeerWithinThreeSeconds) {
  const HeartbeatOptions defaults;
  EXPECT_EQ(defaults.interval(), milliseconds(500));
  EXPECT_EQ(defaults.liveness(), 5);
  // Expiry plus the service's sweep (interval / 5) stays under 3 s.
  EXPECT_LT(defaults.expiry() + defaults.interval() / 5, milliseconds(3000));
}

class ElasticRendezvous : public ::testing::Test {
 protected:
  void serve(const RendezvousOptions& options) {
    service_ = std::make_unique<RendezvousService>(options);
    endpoint_ = service_->start("tcp://127.0.0.1:0");
  }

  std::unique_ptr<RendezvousClient> agent(const std::string& node_id, int local_workers = 1) {
    return std::make_unique<RendezvousClient>(endpoint_,
                                              RendezvousClientOptions(node_id, "host-" + node_id, local_workers)
                                                  .heartbeat(kFastHeartbeat)
                                                  .reconnect_backoff_max(milliseconds(400))
                                                  .service_timeout(kServiceTimeout));
  }

  // join() on every client at once, each on its own thread (as agents on separate nodes).
  static constexpr int kFirstOfferedPort = 30000;
  static std::vector<StatusOr<Assignment>> join_all(const std::vector<RendezvousClient*>& clients,
                                                    milliseconds timeout = seconds(10)) {
    std::vector<std::optional<StatusOr<Assignment>>> results(clients.size());
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < clients.size(); ++i) {
      // Client i offers port kFirstOfferedPort + i for its workers' own store (MASTER_PORT).
      threads.emplace_back(
          [&, i] { results[i].emplace(clients[i]->join(timeout, kFirstOfferedPort + static_cast<int>(i))); });
    }
    for (auto& t : threads) t.join();
    std::vector<StatusOr<Assignment>> out;
    for (auto& r : results) out.push_back(std::move(*r));
    return out;
  }

  static void expect_all_ok(const std::vector<StatusOr<Assignment>>& results) {
    for (const auto& r : results) ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  }

  std::unique_ptr<RendezvousService> service_;
  std::string endpoint_;
};

class ElasticRendezvousWorld : public ElasticRendezvous, public ::testing::WithParamInterface<int> {};

TEST_P(ElasticRendezvousWorld, AgentsFormGenerationZeroWithDistinctRanksInNodeIdOrder) {
  const int n = GetParam();
  serve(fast_options(n, n).resume_step(77));
  // Created (and joining) in reverse id order with 1..n workers: ranks follow the node ids.
  std::vector<std::unique_ptr<RendezvousClient>> agents;
  std::vector<RendezvousClient*> raw;
  for (int i = n - 1; i >= 0; --i) {
    agents.push_back(agent("node-" + std::to_string(i), i + 1));
    raw.push_back(agents.back().get());
  }
  const auto results = join_all(raw);
  expect_all_ok(results);

  const int world = n * (n + 1) / 2;
  std::vector<int> ranks;
  for (std::size_t k = 0; k < results.size(); ++k) {
    const Assignment& a = results[k].value();
    const int i = n - 1 - static_cast<int>(k);  // agent k is node-i with i + 1 workers
    EXPECT_EQ(a.generation, 0);
    EXPECT_EQ(a.num_nodes, n);
    EXPECT_EQ(a.node_rank, i);
    EXPECT_EQ(a.local_world_size, i + 1);
    EXPECT_EQ(a.rank_offset, i * (i + 1) / 2);
    EXPECT_EQ(a.world_size, world);
    EXPECT_EQ(a.store_prefix, "gen/0/");
    EXPECT_EQ(a.store_endpoint, service_->store_endpoint());
    EXPECT_EQ(a.master_host, "host-node-0");
    EXPECT_EQ(a.master_port, kFirstOfferedPort + n - 1);  // node-0's offer (the last client) for all
    EXPECT_EQ(a.resume_step, 77);
    for (int r = 0; r < a.local_world_size; ++r) ranks.push_back(a.rank_offset + r);
    EXPECT_TRUE(raw[k]->status().is_ok()) << raw[k]->status().to_string();
  }
  std::sort(ranks.begin(), ranks.end());
  std::vector<int> expected(static_cast<std::size_t>(world));
  for (int r = 0; r < world; ++r) expected[static_cast<std::size_t>(r)] = r;
  EXPECT_EQ(ranks, expected);  // every global rank exactly once

  const auto snapshot = service_->snapshot();
  EXPECT_EQ(snapshot.generation, 0);
  EXPECT_EQ(snapshot.world_size, world);
  EXPECT_TRUE(std::is_sorted(snapshot.members.begin(), snapshot.members.end()));
  EXPECT_TRUE(snapshot.waiting.empty());
}

INSTANTIATE_TEST_SUITE_P(Nodes, ElasticRendezvousWorld, ::testing::Values(2, 3, 4));

TEST_F(ElasticRendezvous, LastCallWindowAdmitsLateJoinersUpToMax) {
  const auto last_call = milliseconds(400);
  serve(fast_options(2, 4).last_call(last_call));
  auto a = agent("a");
  auto b = agent("b");
  auto c = agent("c");
  const auto start = Clock::now();
  std::optional<StatusOr<Assignment>> late;
  std::thread third([&] {
    std::this_thread::sleep_for(milliseconds(100));  // joins after min (2) is reached
    late.emplace(c->join(seconds(10)));
  });
  const auto results = join_all({a.get(), b.get()});
  const auto elapsed = ms_since(start);
  third.join();
  expect_all_ok(results);
  ASSERT_TRUE(late->is_ok()) << late->status().to_string();
  // Min was reached at once, but the round stayed open for the last call, and took c.
  EXPECT_GE(elapsed, last_call.count());
  EXPECT_LT(elapsed, fast_options(2, 4).join_timeout().count());
  const std::vector<const StatusOr<Assignment>*> all{&results[0], &results[1], &*late};
  for (const auto* r : all) {
    EXPECT_EQ(r->value().generation, 0);
    EXPECT_EQ(r->value().world_size, 3);
    EXPECT_EQ(r->value().num_nodes, 3);
  }
  EXPECT_EQ(late->value().node_rank, 2);
}

TEST_F(ElasticRendezvous, JoinTimeoutFailsNamingMinCountAndNodes) {
  serve(fast_options(3, 4).join_timeout(milliseconds(400)));
  auto a = agent("node-a");
  auto b = agent("node-b");
  const auto start = Clock::now();
  const auto results = join_all({a.get(), b.get()}, seconds(10));
  EXPECT_LT(ms_since(start), 5000);  // the service's timeout, not the client's 10 s
  for (const auto& r : results) {
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().to_string();
    const std::string& m = r.status().message();
    EXPECT_TRUE(contains(m, "2 node(s) joined")) << m;
    EXPECT_TRUE(contains(m, "fewer than the minimum of 3")) << m;
    EXPECT_TRUE(contains(m, "node-a (host-node-a)")) << m;
    EXPECT_TRUE(contains(m, "node-b (host-node-b)")) << m;
    EXPECT_TRUE(contains(m, "400 ms")) << m;
  }
  EXPECT_TRUE(contains(service_->snapshot().last_failure, "fewer than the minimum of 3"));
  EXPECT_EQ(service_->snapshot().generation, -1);
}

TEST_F(ElasticRendezvous, SilentAgentIsDetectedAndSurvivorsFormTheNextGeneration) {
  serve(fast_options(2, 3));
  auto a = agent("a", 2);
  auto b = agent("b", 1);
  auto c = agent("c", 1);
  auto first = join_all({a.get(), b.get(), c.get()});
  expect_all_ok(first);
  EXPECT_EQ(first[2].value().rank_offset, 3);

  auto store = connect_store(first[0].value().store_endpoint, seconds(5));
  store->set("gen/0/probe", {'x'});

  // b's node dies: its client goes away without a word (its socket closes, linger 0).
  const auto killed = Clock::now();
  b.reset();
  const Status seen_by_a = a->watch(seconds(5));
  const auto detected_ms = ms_since(killed);
  const Status seen_by_c = c->watch(seconds(5));
  ASSERT_EQ(seen_by_a.code(), StatusCode::kAborted) << seen_by_a.to_string();
  ASSERT_EQ(seen_by_c.code(), StatusCode::kAborted) << seen_by_c.to_string();
  EXPECT_TRUE(contains(seen_by_a.message(), "node 'b'")) << seen_by_a.message();
  EXPECT_TRUE(contains(seen_by_a.message(), "missed heartbeats")) << seen_by_a.message();
  // Declared after interval x liveness of silence (its last beat was at most one interval
  // before the kill) and pushed to the survivors then; 2 x expiry leaves room for a slow box.
  const auto expiry = kFastHeartbeat.expiry().count();
  const auto interval = kFastHeartbeat.interval().count();
  EXPECT_GE(detected_ms, expiry - interval);
  EXPECT_LE(detected_ms, 2 * expiry);
  EXPECT_EQ(service_->snapshot().nodes_lost, 1u);

  auto second = join_all({a.get(), c.get()});
  expect_all_ok(second);
  EXPECT_EQ(second[0].value().generation, 1);
  EXPECT_EQ(second[0].value().world_size, 3);
  EXPECT_EQ(second[0].value().num_nodes, 2);
  EXPECT_EQ(second[0].value().rank_offset, 0);
  EXPECT_EQ(second[1].value().rank_offset, 2);  // c moved down from 3
  EXPECT_EQ(second[1].value().node_rank, 1);
  EXPECT_EQ(second[1].value().store_prefix, "gen/1/");
  // The old generation's keys were dropped when generation 1 formed.
  EXPECT_THROW(store->get("gen/0/probe", milliseconds(50)), TimeoutError);
}

TEST_F(ElasticRendezvous, RequestedRestartWithTheSameNodesKeepsRanksAndCarriesTheResumeStep) {
  serve(fast_options(3, 3));
  auto a = agent("a", 2);
  auto b = agent("b", 3);
  auto c = agent("c", 1);
  auto first = join_all({c.get(), a.get(), b.get()});
  expect_all_ok(first);

  ASSERT_TRUE(c->set_resume_step(1234, seconds(5)).is_ok());
  EXPECT_EQ(service_->snapshot().resume_step, 1234);
  const Status asked = b->request_restart("worker rank 3 exited with status 1", seconds(5));
  ASSERT_TRUE(asked.is_ok()) << asked.to_string();
  EXPECT_EQ(b->status().code(), StatusCode::kAborted);
  for (auto* other : {a.get(), c.get()}) {
    const Status s = other->watch(seconds(5));
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "worker rank 3 exited with status 1")) << s.message();
  }

  auto second = join_all({a.get(), b.get(), c.get()});
  expect_all_ok(second);
  for (std::size_t i = 0; i < 3; ++i) {
    Assignment expected = first[(i + 1) % 3].value();  // first was joined as c, a, b
    expected.generation = 1;
    expected.store_prefix = "gen/1/";
    expected.resume_step = 1234;
    expected.master_port = kFirstOfferedPort;  // node a's new offer, first in this join: new each generation
    EXPECT_EQ(second[i].value(), expected) << "agent " << i;
  }
}

// Agents whose workers finish one after another must not restart the others (LEAVE would).
TEST_F(ElasticRendezvous, FinishedAgentsLeaveWithoutEndingTheGenerationForTheOthers) {
  serve(fast_options(1, 3));
  auto a = agent("a");
  auto b = agent("b");
  auto c = agent("c");
  expect_all_ok(join_all({a.get(), b.get(), c.get()}));
  EXPECT_EQ(service_->snapshot().live, (std::vector<std::string>{"a", "b", "c"}));

  ASSERT_TRUE(a->finish(seconds(5)).is_ok());
  EXPECT_EQ(a->status().code(), StatusCode::kFailedPrecondition) << "no longer in a generation";
  // Well past a heartbeat expiry: b and c are still in generation 0, nothing was restarted.
  EXPECT_EQ(b->watch(milliseconds(800)).code(), StatusCode::kOk);
  EXPECT_TRUE(c->status().is_ok());
  auto snapshot = service_->snapshot();
  EXPECT_FALSE(snapshot.restart_requested) << snapshot.restart_reason;
  EXPECT_EQ(snapshot.finished, std::vector<std::string>{"a"});
  EXPECT_EQ(snapshot.live, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(snapshot.nodes_lost, 0u) << "a finished node is not a lost node";

  // A newcomer while the job is finishing waits as a spare rather than restarting it.
  auto d = agent("d");
  std::thread joiner([&] { (void)d->join(milliseconds(1500)); });
  EXPECT_TRUE(eventually([&] { return service_->snapshot().waiting == std::vector<std::string>{"d"}; }));
  EXPECT_TRUE(b->status().is_ok());
  joiner.join();

  ASSERT_TRUE(b->finish(seconds(5)).is_ok());
  ASSERT_TRUE(c->finish(seconds(5)).is_ok());
  EXPECT_TRUE(eventually([&] { return service_->snapshot().live.empty(); }));
  EXPECT_EQ(service_->snapshot().finished, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(service_->snapshot().restart_requested);
}

// If a member still running fails after another finished, the next generation forms without
// the finished node.
TEST_F(ElasticRendezvous, FailureAfterAnotherNodeFinishedReformsWithoutIt) {
  serve(fast_options(1, 2));
  auto a = agent("a");
  auto b = agent("b");
  expect_all_ok(join_all({a.get(), b.get()}));
  ASSERT_TRUE(a->finish(seconds(5)).is_ok());
  ASSERT_TRUE(b->request_restart("worker rank 1 was killed by signal 9 (SIGKILL)", seconds(5)).is_ok());
  auto again = b->join(seconds(5));
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(again.value().generation, 1);
  EXPECT_EQ(again.value().num_nodes, 1);
  EXPECT_EQ(again.value().world_size, 1);
}

TEST_F(ElasticRendezvous, AgentJoiningMidGenerationGetsInAtTheNext) {
  serve(fast_options(2, 4));
  auto a = agent("a");
  auto b = agent("b");
  expect_all_ok(join_all({a.get(), b.get()}));

  auto c = agent("c");
  std::optional<StatusOr<Assignment>> late;
  std::thread joiner([&] { late.emplace(c->join(seconds(10))); });
  for (auto* running : {a.get(), b.get()}) {
    const Status s = running->watch(seconds(5));
    EXPECT_EQ(s.code(), StatusCode::kAborted) << s.to_string();
    EXPECT_TRUE(contains(s.message(), "node 'c' joined")) << s.message();
  }
  const auto snapshot = service_->snapshot();
  EXPECT_EQ(snapshot.generation, 0);
  EXPECT_EQ(snapshot.waiting, std::vector<std::string>{"c"});

  auto rejoined = join_all({a.get(), b.get()});
  joiner.join();
  expect_all_ok(rejoined);
  ASSERT_TRUE(late->is_ok()) << late->status().to_string();
  EXPECT_EQ(late->value().generation, 1);
  EXPECT_EQ(late->value().world_size, 3);
  EXPECT_EQ(late->value().rank_offset, 2);
  EXPECT_EQ(rejoined[1].value().rank_offset, 1);
}

TEST_F(ElasticRendezvous, AgentBeyondMaxWaitsAsASpareWithoutDisturbingTheGeneration) {
  serve(fast_options(2, 2));
  auto a = agent("a");
  auto b = agent("b");
  expect_all_ok(join_all({a.get(), b.get()}));
  auto spare = agent("spare");
  const auto waited = spare->join(milliseconds(600));
  ASSERT_FALSE(waited.is_ok());
  EXPECT_EQ(waited.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(contains(waited.status().message(), "1 node(s) waiting for generation 1")) << waited.status().message();
  EXPECT_TRUE(a->status().is_ok()) << a->status().to_string();
  EXPECT_FALSE(service_->snapshot().restart_requested);
}

TEST_F(ElasticRendezvous, AgentsSeeTheServiceDieAfterTheServiceTimeout) {
  serve(fast_options(2, 2));
  auto a = agent("a");
  auto b = agent("b");
  expect_all_ok(join_all({a.get(), b.get()}));
  const auto stopped = Clock::now();
  service_->stop();
  const Status s = a->watch(seconds(10));
  const auto seen_ms = ms_since(stopped);
  ASSERT_EQ(s.code(), StatusCode::kUnavailable) << s.to_string();
  EXPECT_TRUE(contains(s.message(), endpoint_)) << s.message();
  EXPECT_GE(seen_ms, kServiceTimeout.count() - kFastHeartbeat.interval().count());
  EXPECT_LE(seen_ms, 2 * kServiceTimeout.count());
  EXPECT_EQ(b->watch(seconds(5)).code(), StatusCode::kUnavailable);

  // Joining a service that is gone: an error once the deadline passes, never a hang.
  auto late = agent("late");
  const auto joined = late->join(milliseconds(300));
  ASSERT_FALSE(joined.is_ok());
  EXPECT_EQ(joined.status().code(), StatusCode::kDeadlineExceeded) << joined.status().to_string();
  EXPECT_TRUE(contains(joined.status().message(), "never answered")) << joined.status().message();
}

TEST_F(ElasticRendezvous, JoiningAgentsReconnectToARestartedService) {
  serve(fast_options(3, 3));  // never forms with two
  const std::string endpoint = endpoint_;
  auto a = agent("a");
  auto b = agent("b");
  std::vector<std::optional<StatusOr<Assignment>>> results(2);
  std::thread ta([&] { results[0].emplace(a->join(seconds(10))); });
  std::thread tb([&] { results[1].emplace(b->join(seconds(10))); });
  ASSERT_TRUE(eventually([&] { return service_->snapshot().waiting.size() == 2; }));
  service_->stop();
  // Down for longer than interval x liveness: the agents give up on their sockets and
  // reconnect with new ones (backing off); their JOINs reach the new service on the same port.
  std::this_thread::sleep_for(kFastHeartbeat.expiry() + kFastHeartbeat.interval() * 2);
  RendezvousService restarted(fast_options(2, 2));
  ASSERT_EQ(restarted.start(endpoint), endpoint);
  ta.join();
  tb.join();
  for (auto& r : results) {
    ASSERT_TRUE(r->is_ok()) << r->status().to_string();
    EXPECT_EQ(r->value().generation, 0);
    EXPECT_EQ(r->value().world_size, 2);
  }
}

// The hosting agent died and came back: its new service must not number generations from 0
// again. The members' JOINs, queued while it was down, arrive in a burst and carry the last
// generation they saw; the new service goes on above it, and the burst's duplicates re-send the
// ASSIGN instead of ending the generation they just formed (found by tools/chaos.py).
TEST_F(ElasticRendezvous, ARestartedServiceGoesOnAboveTheMembersLastGenerationAndKeepsIt) {
  serve(fast_options(2, 2));
  const std::string endpoint = endpoint_;
  auto a = agent("a");
  auto b = agent("b");
  expect_all_ok(join_all({a.get(), b.get()}));
  for (int restart = 0; restart < 2; ++restart) {
    ASSERT_TRUE(a->request_restart("test restart", seconds(5)).is_ok());
    ASSERT_EQ(b->watch(seconds(5)).code(), StatusCode::kAborted);
    expect_all_ok(join_all({a.get(), b.get()}));
  }
  ASSERT_EQ(service_->snapshot().generation, 2);
  service_->stop();

  std::vector<std::optional<StatusOr<Assignment>>> results(2);
  std::thread ta([&] { results[0].emplace(a->join(seconds(10))); });
  std::thread tb([&] { results[1].emplace(b->join(seconds(10))); });
  std::this_thread::sleep_for(milliseconds(350));  // a few JOINs queue on each socket
  RendezvousService restarted(fast_options(2, 2));
  ASSERT_EQ(restarted.start(endpoint), endpoint);
  ta.join();
  tb.join();
  for (auto& r : results) {
    ASSERT_TRUE(r->is_ok()) << r->status().to_string();
    EXPECT_EQ(r->value().generation, 3);
    EXPECT_EQ(r->value().store_prefix, "gen/3/");
  }
  // Well past the burst and several heartbeats: generation 3 still stands.
  std::this_thread::sleep_for(kFastHeartbeat.interval() * 8);
  const auto snapshot = restarted.snapshot();
  EXPECT_EQ(snapshot.generation, 3);
  EXPECT_FALSE(snapshot.restart_requested) << snapshot.restart_reason;
  EXPECT_TRUE(a->status().is_ok()) << a->status().to_string();
  EXPECT_TRUE(b->status().is_ok()) << b->status().to_string();
}

TEST_F(ElasticRendezvous, MalformedMessagesAreLoggedAndIgnored) {
  serve(fast_options(2, 2));
  zmq::context_t context(1);
  zmq::socket_t raw(context, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(endpoint_);

  const auto i64 = [](std::int64_t v) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
    return out;
  };
  const std::string join{char(1), char(1)};
  std::vector<std::vector<std::string>> messages = {
      {""},                                                        // empty header
      {"garbage"},                                                 // not a header
      {std::string{char(2), char(1)}, "n", "h", i64(1), i64(-1)},  // unknown version
      {std::string{char(1), char(99)}},                            // unknown type
      {std::string{char(1), char(102)}, "x"},                      // a service message
      {join, "n", "h", i64(1)},                                    // a field short
      {join, "n", "h", "1234567", i64(-1)},                        // a 7-byte integer
      {join, "n", "h", i64(0), i64(-1)},                           // zero workers
      {join, "n", "h", i64(1 << 20), i64(-1)},                     // too many workers
      {join, std::string(300, 'n'), "h", i64(1), i64(-1)},         // node id too long
      {join, "", "h", i64(1), i64(-1)},                            // empty node id
      {std::string{char(1), char(2)}, "n"},                        // HEARTBEAT without generation
  };
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {  // random junk whose header is never 2 bytes long
    std::vector<std::string> junk;
    const int frames = 1 + static_cast<int>(rng() % 5);
    for (int f = 0; f < frames; ++f) {
      std::string bytes(3 + rng() % 40, '\0');
      for (auto& ch : bytes) ch = static_cast<char>(rng());
      junk.push_back(bytes);
    }
    messages.push_back(junk);
  }
  for (const auto& m : messages) {
    std::vector<zmq::const_buffer> frames;
    for (const auto& f : m) frames.push_back(zmq::buffer(f));
    ASSERT_TRUE(zmq::send_multipart(raw, frames).has_value());
  }
  ASSERT_TRUE(eventually([&] { return service_->snapshot().malformed_messages == messages.size(); }))
      << service_->snapshot().malformed_messages << " of " << messages.size();

  // Nothing was answered, nobody joined, and the service still serves real agents.
  zmq::pollitem_t item{raw.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, milliseconds(100));
  EXPECT_FALSE(item.revents & ZMQ_POLLIN);
  EXPECT_TRUE(service_->snapshot().waiting.empty());
  auto a = agent("a");
  auto b = agent("b");
  expect_all_ok(join_all({a.get(), b.get()}));
}

}  // namespace
}  // namespace tenax::elastic
