#include "tenax/elastic/in_memory_store.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "tenax/core/error.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;

std::vector<char> bytes(const std::string& s) { return std::vector<char>(s.begin(), s.end()); }

TEST(ElasticInMemoryStore, SetThenGetReturnsTheValue) {
  InMemoryStore store;
  store.set("k", bytes("v1"));
  EXPECT_EQ(store.get("k", milliseconds(10)), bytes("v1"));
  store.set("k", bytes("v2"));
  EXPECT_EQ(store.get("k", milliseconds(10)), bytes("v2"));
}

TEST(ElasticInMemoryStore, GetReturnsAValueSetByAnotherThread) {
  InMemoryStore store;
  std::vector<char> got;
  std::thread getter([&] { got = store.get("late", std::chrono::seconds(30)); });
  store.set("late", bytes("here"));
  getter.join();
  EXPECT_EQ(got, bytes("here"));
}

TEST(ElasticInMemoryStore, AddIsAtomicAcrossThreads) {
  InMemoryStore store;
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_EQ(store.add("n", -5), 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) store.add("n", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(store.add("n", 0), 4000);
  EXPECT_EQ(store.get("n", milliseconds(10)), bytes("4000"));  // decimal text, as Gloo/c10d stores
}

TEST(ElasticInMemoryStore, AddOnANonCounterKeyThrowsNamingIt) {
  InMemoryStore store;
  store.set("text", bytes("abc"));
  try {
    store.add("text", 1);
    FAIL() << "add on a non-integer value must throw";
  } catch (const RendezvousError& e) {
    EXPECT_NE(std::string(e.what()).find("'text'"), std::string::npos) << e.what();
  }
}

TEST(ElasticInMemoryStore, WaitReturnsOnceEveryKeyExists) {
  InMemoryStore store;
  std::thread waiter([&] { store.wait({"a", "b", "c"}, std::chrono::seconds(30)); });
  store.set("a", {});
  store.add("b", 1);
  store.set("c", bytes("x"));
  waiter.join();
  EXPECT_EQ(store.size(), 3u);
}

TEST(ElasticInMemoryStore, GetTimesOutNamingTheKey) {
  InMemoryStore store;
  try {
    store.get("missing/key", milliseconds(20));
    FAIL() << "get of an absent key must time out";
  } catch (const TimeoutError& e) {
    EXPECT_NE(std::string(e.what()).find("'missing/key'"), std::string::npos) << e.what();
  }
}

TEST(ElasticInMemoryStore, WaitTimeoutNamesOnlyTheMissingKeys) {
  InMemoryStore store;
  store.set("present", bytes("1"));
  try {
    store.wait({"present", "absent"}, milliseconds(20));
    FAIL() << "wait must time out";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'absent'"), std::string::npos) << message;
    EXPECT_EQ(message.find("'present'"), std::string::npos) << message;
  }
}

TEST(ElasticInMemoryStore, DropPrefixRemovesOnlyThatPrefix) {
  InMemoryStore store;
  store.set("gen/1/a", bytes("1"));
  store.set("gen/1/b", bytes("1"));
  store.set("gen/10/a", bytes("1"));
  store.set("gen/2/a", bytes("1"));
  EXPECT_EQ(store.drop_prefix("gen/1/"), 2u);
  EXPECT_THROW(store.get("gen/1/a", milliseconds(5)), TimeoutError);
  EXPECT_EQ(store.get("gen/10/a", milliseconds(5)), bytes("1"));
  EXPECT_EQ(store.get("gen/2/a", milliseconds(5)), bytes("1"));
}

}  // namespace
}  // namespace tenax::elastic
