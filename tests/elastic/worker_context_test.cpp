#include "tenax/elastic/worker_context.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/in_memory_store.h"
#include "tenax/elastic/kv_service.h"

namespace tenax::elastic {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

const char* const kVariables[] = {"RANK",
                                  "LOCAL_RANK",
                                  "WORLD_SIZE",
                                  "LOCAL_WORLD_SIZE",
                                  "MASTER_ADDR",
                                  "TENAX_GENERATION",
                                  "TENAX_RESTART_COUNT",
                                  "TENAX_RDZV_ENDPOINT",
                                  "TENAX_GLOO_HOSTNAME",
                                  "TENAX_FENCE_DIR"};

// Each test starts from an environment without the launcher's variables and leaves none behind.
class ElasticWorkerContext : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* name : kVariables) ::unsetenv(name);
  }
  static void set(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

  // Expects from_env() to throw ConfigError whose message contains `needle`.
  static void expect_config_error(const std::string& needle) {
    try {
      WorkerContext::from_env(seconds(5));
      ADD_FAILURE() << "from_env must reject the environment (" << needle << ")";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  }
};

TEST_F(ElasticWorkerContext, WithoutRankItIsASingleProcess) {
  auto ctx = WorkerContext::from_env();
  EXPECT_EQ(ctx.rank(), 0);
  EXPECT_EQ(ctx.world_size(), 1);
  EXPECT_EQ(ctx.generation(), 0);
  EXPECT_EQ(ctx.store(), nullptr);
  EXPECT_EQ(ctx.fence(), nullptr) << "not fenced without the launcher";
  double x = 2.5;
  ctx.communicator().allreduce(&x, 1, ElementType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(x, 2.5);
  const auto gathered = allgather_strings(ctx.communicator(), "only");
  EXPECT_EQ(gathered, std::vector<std::string>{"only"});
  EXPECT_TRUE(ctx.finalize(seconds(1)));
}

TEST_F(ElasticWorkerContext, WorldOfOneFromTheLaunchersEnvironment) {
  KvService service;
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  set("RANK", "0");
  set("LOCAL_RANK", "0");
  set("WORLD_SIZE", "1");
  set("LOCAL_WORLD_SIZE", "1");
  set("TENAX_GENERATION", "3");
  set("TENAX_RESTART_COUNT", "2");
  set("TENAX_RDZV_ENDPOINT", endpoint);
  set("MASTER_ADDR", "127.0.0.1");
  set("TENAX_FENCE_DIR", "/shared/job");

  auto ctx = WorkerContext::from_env(seconds(10));
  ASSERT_NE(ctx.fence(), nullptr);
  EXPECT_EQ(ctx.fence()->dir(), "/shared/job");
  EXPECT_EQ(ctx.rank(), 0);
  EXPECT_EQ(ctx.world_size(), 1);
  EXPECT_EQ(ctx.identity().local_rank, 0);
  EXPECT_EQ(ctx.identity().local_world_size, 1);
  EXPECT_EQ(ctx.generation(), 3);
  EXPECT_EQ(ctx.restart_count(), 2);
  ASSERT_NE(ctx.store(), nullptr);
  ctx.store()->set("hello", {'h', 'i'});
  auto observer = connect_store(endpoint, seconds(10));
  EXPECT_EQ(observer->get("gen/3/hello", seconds(5)), (std::vector<char>{'h', 'i'}));  // generation prefix

  ctx.communicator().barrier(seconds(5));
  EXPECT_TRUE(ctx.finalize(seconds(5)));
  EXPECT_TRUE(ctx.finalize(seconds(5)));  // safe twice
  EXPECT_THROW(ctx.communicator(), RendezvousError);
  EXPECT_EQ(ctx.store(), nullptr);
}

TEST_F(ElasticWorkerContext, RankThatIsNotANumberNamesTheVariable) {
  set("RANK", "abc");
  set("WORLD_SIZE", "2");
  expect_config_error("RANK='abc'");
}

TEST_F(ElasticWorkerContext, RankOutsideTheWorldNamesTheVariable) {
  set("RANK", "2");
  set("WORLD_SIZE", "2");
  expect_config_error("RANK=2");
  set("RANK", "-1");
  expect_config_error("RANK=-1");
}

TEST_F(ElasticWorkerContext, OtherBadValuesNameTheirVariable) {
  set("RANK", "0");
  expect_config_error("WORLD_SIZE");  // unset
  set("WORLD_SIZE", "0");
  expect_config_error("WORLD_SIZE=0");
  set("WORLD_SIZE", "2");
  set("LOCAL_WORLD_SIZE", "3");
  expect_config_error("LOCAL_WORLD_SIZE=3");
  set("LOCAL_WORLD_SIZE", "2");
  set("LOCAL_RANK", "2");
  expect_config_error("LOCAL_RANK=2");
  set("LOCAL_RANK", "0");
  set("TENAX_GENERATION", "-4");
  expect_config_error("TENAX_GENERATION=-4");
  set("TENAX_GENERATION", "1");
  set("TENAX_RESTART_COUNT", "x");
  expect_config_error("TENAX_RESTART_COUNT='x'");
  set("TENAX_RESTART_COUNT", "0");
  set("WORLD_SIZE", "99999999999");
  expect_config_error("WORLD_SIZE=99999999999");
  set("WORLD_SIZE", "2");
  expect_config_error("TENAX_RDZV_ENDPOINT");  // a world of two needs the service
}

TEST_F(ElasticWorkerContext, UnreachableServiceIsARendezvousError) {
  KvService service;
  const std::string endpoint = service.start("tcp://127.0.0.1:0");
  service.stop();
  set("RANK", "0");
  set("WORLD_SIZE", "2");
  set("TENAX_RDZV_ENDPOINT", endpoint);
  EXPECT_THROW(WorkerContext::from_env(milliseconds(200)), RendezvousError);
}

TEST_F(ElasticWorkerContext, AssembledFromPartsRejectsAMismatchedCommunicator) {
  WorkerIdentity id;
  id.rank = 1;
  id.world_size = 2;
  EXPECT_THROW(WorkerContext(id, nullptr, make_local_communicator()), ConfigError);
}

// Two ranks as threads: finalize is a barrier, and reports peers that never reach it.
TEST_F(ElasticWorkerContext, FinalizeSucceedsWhenEveryRankCallsIt) {
  InMemoryStore store;
  std::vector<std::future<bool>> done;
  for (int r = 0; r < 2; ++r) {
    done.push_back(std::async(std::launch::async, [&store, r] {
      WorkerIdentity id;
      id.rank = r;
      id.world_size = 2;
      WorkerContext ctx(id, nullptr, make_gloo_communicator(store, r, 2, GlooOptions{}));
      return ctx.finalize(seconds(30));
    }));
  }
  for (auto& f : done) EXPECT_TRUE(f.get());
}

TEST_F(ElasticWorkerContext, FinalizeReturnsFalseWhenAPeerNeverArrives) {
  InMemoryStore store;
  std::promise<void> rank0_finished;
  std::thread peer([&] {
    auto comm = make_gloo_communicator(store, 1, 2, GlooOptions{});
    rank0_finished.get_future().wait();  // never enters the final barrier
  });
  WorkerIdentity id;
  id.rank = 0;
  id.world_size = 2;
  WorkerContext ctx(id, nullptr, make_gloo_communicator(store, 0, 2, GlooOptions{}));
  const bool ok = ctx.finalize(milliseconds(200));
  rank0_finished.set_value();
  peer.join();
  EXPECT_FALSE(ok);
  EXPECT_TRUE(ctx.finalize(milliseconds(200)));  // already released: nothing left to do
}

TEST_F(ElasticWorkerContext, MoveKeepsTheCommunicator) {
  WorkerContext a(WorkerIdentity{}, nullptr, make_local_communicator());
  WorkerContext b = std::move(a);
  b.communicator().barrier(seconds(1));
  WorkerContext c(WorkerIdentity{}, nullptr, make_local_communicator());
  c = std::move(b);
  c.communicator().barrier(seconds(1));
}

}  // namespace
}  // namespace tenax::elastic
