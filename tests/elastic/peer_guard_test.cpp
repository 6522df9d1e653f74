// CURVE with the job's keys on the key-value store and the rendezvous service, over real ZeroMQ
// on tcp://127.0.0.1: the job's clients get in; a client without keys, with another job's keys,
// or with the server key but a foreign client key is refused, counted and nothing it sends is
// served.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>

#include "support/eventually.h"
#include "tenax/core/error.h"
#include "tenax/elastic/job_keys.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/rendezvous_client.h"
#include "tenax/elastic/rendezvous_service.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

using tenax::testing::eventually;

// The job's server key with a client key pair the job never issued.
JobKeys with_foreign_client(const JobKeys& job) {
  const JobKeys other = JobKeys::generate();
  JobKeys keys = job;
  keys.client_public = other.client_public;
  keys.client_secret = other.client_secret;
  return keys;
}

class ElasticPeerGuardStore : public ::testing::Test {
 protected:
  void SetUp() override { endpoint_ = service_.start("tcp://127.0.0.1:0"); }

  // True when a client with `keys` is refused: it never gets an answer.
  bool refused(const std::optional<JobKeys>& keys) {
    try {
      (void)connect_store(endpoint_, milliseconds(700), keys);
    } catch (const RendezvousError&) {
      return true;
    }
    return false;
  }

  const JobKeys keys_ = JobKeys::generate();
  KvService service_{keys_};
  std::string endpoint_;
};

TEST_F(ElasticPeerGuardStore, TheJobsClientIsServed) {
  auto store = connect_store(endpoint_, seconds(10), keys_);
  store->set("k", {'v'});
  EXPECT_EQ(store->get("k", seconds(1)), std::vector<char>{'v'});
  EXPECT_EQ(service_.refused_peers(), 0u);
}

TEST_F(ElasticPeerGuardStore, AClientWithoutKeysIsRefusedAndCounted) {
  EXPECT_TRUE(refused(std::nullopt));
  EXPECT_TRUE(eventually([&] { return service_.refused_peers() >= 1; })) << service_.refused_peers();
}

TEST_F(ElasticPeerGuardStore, AnotherJobsKeysAreRefused) {
  EXPECT_TRUE(refused(JobKeys::generate()));
  EXPECT_TRUE(eventually([&] { return service_.refused_peers() >= 1; }));
}

TEST_F(ElasticPeerGuardStore, TheServerKeyAloneIsNotEnough) {
  // Knowing the server's public key (it is no secret) with a self-made client key: ZAP says no.
  EXPECT_TRUE(refused(with_foreign_client(keys_)));
  EXPECT_TRUE(eventually([&] { return service_.refused_peers() >= 1; }));
  // The job's own clients are still served afterwards.
  auto store = connect_store(endpoint_, seconds(10), keys_);
  EXPECT_EQ(store->add("n", 2), 2);
}

TEST(ElasticPeerGuard, AStoreWithoutKeysServesPlainClients) {
  KvService service;
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  auto store = connect_store(endpoint, seconds(10));
  EXPECT_EQ(store->add("n", 1), 1);
  EXPECT_EQ(service.refused_peers(), 0u);
}

TEST(ElasticPeerGuard, RendezvousAdmitsTheJobsAgentsAndRefusesOthersWithoutDisturbingThem) {
  const JobKeys keys = JobKeys::generate();
  const auto heartbeat = HeartbeatOptions().interval(milliseconds(100)).liveness(5);
  RendezvousService service(
      RendezvousOptions(1, 2).last_call(milliseconds(200)).join_timeout(seconds(5)).heartbeat(heartbeat).keys(keys));
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  auto client_options = [&](const std::string& id) {
    return RendezvousClientOptions(id, "host-" + id, 1)
        .heartbeat(heartbeat)
        .reconnect_backoff_max(milliseconds(400))
        .service_timeout(milliseconds(1200));
  };

  RendezvousClient member(endpoint, client_options("node-0").keys(keys));
  const auto assigned = member.join(seconds(10));
  ASSERT_TRUE(assigned.is_ok()) << assigned.status().to_string();
  EXPECT_EQ(assigned.value().generation, 0);
  // The store endpoint it was given takes the same keys.
  auto store = connect_store(assigned.value().store_endpoint, seconds(10), keys);
  store->set("gen/0/x", {'1'});

  // Three intruders try to join: no keys, another job's keys, the server key with a foreign
  // client key. None is assigned, and the running generation is not ended for them.
  RendezvousClient plain(endpoint, client_options("intruder-plain"));
  RendezvousClient foreign(endpoint, client_options("intruder-foreign").keys(JobKeys::generate()));
  RendezvousClient forged(endpoint, client_options("intruder-forged").keys(with_foreign_client(keys)));
  for (RendezvousClient* intruder : {&plain, &foreign, &forged}) {
    const auto result = intruder->join(milliseconds(800));
    EXPECT_FALSE(result.is_ok()) << "an intruder was assigned a rank";
  }
  EXPECT_TRUE(eventually([&] { return service.snapshot().refused_peers >= 3; })) << service.snapshot().refused_peers;
  const auto snapshot = service.snapshot();
  EXPECT_EQ(snapshot.generation, 0);
  EXPECT_FALSE(snapshot.restart_requested) << snapshot.restart_reason;
  EXPECT_EQ(snapshot.live, std::vector<std::string>{"node-0"});
  EXPECT_TRUE(member.status().is_ok()) << member.status().to_string();
}

}  // namespace
}  // namespace tenax::elastic
