#include "tenax/elastic/kv_service.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<char> bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

class ElasticKvService : public ::testing::Test {
 protected:
  void SetUp() override { endpoint_ = service_.start("tcp://127.0.0.1:0"); }
  std::unique_ptr<Store> client(milliseconds timeout = seconds(10)) { return connect_store(endpoint_, timeout); }

  KvService service_;
  std::string endpoint_;
};

TEST_F(ElasticKvService, StartResolvesTheRealPort) {
  EXPECT_EQ(endpoint_.rfind("tcp://127.0.0.1:", 0), 0u) << endpoint_;
  EXPECT_NE(endpoint_, "tcp://127.0.0.1:0");
  EXPECT_EQ(service_.endpoint(), endpoint_);
}

TEST_F(ElasticKvService, SetGetAddAcrossClients) {
  auto a = client();
  auto b = client();
  a->set("key", bytes("value"));
  EXPECT_EQ(b->get("key", seconds(5)), bytes("value"));
  std::vector<char> binary{'\0', '\x01', '\xff', '\0'};
  b->set("binary", binary);
  EXPECT_EQ(a->get("binary", seconds(5)), binary);
  b->set("empty", {});
  EXPECT_TRUE(a->get("empty", seconds(5)).empty());
  EXPECT_EQ(a->add("counter", 3), 3);
  EXPECT_EQ(b->add("counter", 4), 7);
  EXPECT_EQ(a->add("counter", -10), -3);
  EXPECT_EQ(b->get("counter", seconds(5)), bytes("-3"));
  b->wait({"key", "binary", "counter"}, seconds(5));
}

TEST_F(ElasticKvService, GetWaitsForAnotherClientsSet) {
  std::vector<char> got;
  std::thread getter([&] {
    auto c = client();
    got = c->get("later", seconds(30));
  });
  auto setter = client();
  setter->set("later", bytes("arrived"));
  getter.join();
  EXPECT_EQ(got, bytes("arrived"));
}

TEST_F(ElasticKvService, WaitReturnsWhenTheLastKeyArrives) {
  std::thread waiter([&] {
    auto c = client();
    c->wait({"x", "y"}, seconds(30));
  });
  auto setter = client();
  setter->set("x", bytes("1"));
  setter->add("y", 1);
  waiter.join();
}

TEST_F(ElasticKvService, AddConcurrentlyFromManyClients) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto c = client();
      for (int i = 0; i < 100; ++i) c->add("n", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(client()->add("n", 0), 400);
}

TEST_F(ElasticKvService, GetTimeoutThrowsTimeoutErrorNamingTheKey) {
  auto c = client();
  try {
    c->get("gen/0/never", milliseconds(50));
    FAIL() << "get must time out";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'gen/0/never'"), std::string::npos) << e.what();
  }
}

TEST_F(ElasticKvService, WaitTimeoutNamesTheMissingKeys) {
  auto c = client();
  c->set("here", bytes("1"));
  try {
    c->wait({"here", "gone"}, milliseconds(50));
    FAIL() << "wait must time out";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'gone'"), std::string::npos) << message;
    EXPECT_EQ(message.find("'here'"), std::string::npos) << message;
  }
}

TEST_F(ElasticKvService, ALateReplyToATimedOutRequestIsDiscarded) {
  auto slow = client();
  auto other = client();
  EXPECT_THROW(slow->get("a", milliseconds(1)), TimeoutError);  // its NOT_FOUND may arrive later
  other->set("a", bytes("A"));
  other->set("b", bytes("B"));
  EXPECT_EQ(slow->get("b", seconds(5)), bytes("B"));
  EXPECT_EQ(slow->get("a", seconds(5)), bytes("A"));
}

TEST_F(ElasticKvService, ClientCallsAfterStopTimeOutInsteadOfHanging) {
  auto c = client(milliseconds(300));
  c->set("k", bytes("v"));
  service_.stop();
  EXPECT_EQ(service_.endpoint(), "");
  EXPECT_THROW(c->get("k", milliseconds(300)), TimeoutError);
  EXPECT_THROW(c->set("k", bytes("v")), TimeoutError);
  EXPECT_THROW(c->add("n", 1), TimeoutError);
  EXPECT_THROW(c->wait({"k"}, milliseconds(300)), TimeoutError);
}

TEST_F(ElasticKvService, ConnectToAStoppedServiceThrowsRendezvousError) {
  service_.stop();
  try {
    connect_store(endpoint_, milliseconds(200));
    FAIL() << "connect must fail";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find(endpoint_), std::string::npos) << e.what();
  }
}

TEST_F(ElasticKvService, StopIsIdempotentAndRestartServesAgain) {
  service_.stop();
  service_.stop();
  const std::string again = service_.start("tcp://127.0.0.1:0");
  auto c = connect_store(again, seconds(10));
  c->set("k", bytes("v"));
  EXPECT_EQ(c->get("k", seconds(5)), bytes("v"));
}

TEST_F(ElasticKvService, BindingATakenEndpointThrowsRendezvousError) {
  KvService second;
  EXPECT_THROW(second.start(endpoint_), RendezvousError);
  EXPECT_THROW(service_.start("tcp://127.0.0.1:0"), RendezvousError);  // already serving
}

TEST_F(ElasticKvService, DropPrefixRemovesOneGenerationsKeys) {
  auto c = client();
  c->set("gen/1/a", bytes("1"));
  c->set("gen/1/b", bytes("1"));
  c->set("gen/10/a", bytes("10"));
  c->set("gen/2/a", bytes("2"));
  service_.drop_prefix("gen/1/");
  EXPECT_THROW(c->get("gen/1/a", milliseconds(20)), TimeoutError);
  EXPECT_THROW(c->get("gen/1/b", milliseconds(20)), TimeoutError);
  EXPECT_EQ(c->get("gen/10/a", seconds(5)), bytes("10"));
  EXPECT_EQ(c->get("gen/2/a", seconds(5)), bytes("2"));
}

TEST_F(ElasticKvService, PrefixStoreOverTheServiceIsolatesGenerations) {
  auto base = client();
  PrefixStore gen3(generation_prefix(3), *base);
  PrefixStore gen4(generation_prefix(4), *base);
  gen3.set("k", bytes("three"));
  EXPECT_THROW(gen4.get("k", milliseconds(20)), TimeoutError);
  EXPECT_EQ(base->get("gen/3/k", seconds(5)), bytes("three"));
}

}  // namespace
}  // namespace tenax::elastic
