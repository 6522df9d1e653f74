// tenax::Endpoint: the one place "tcp://HOST:PORT" is split and assembled.
#include "tenax/core/endpoint.h"

#include <gtest/gtest.h>

#include "tenax/core/error.h"

namespace tenax {
namespace {

TEST(CoreEndpoint, SplitsAndAssemblesWithOrWithoutTheScheme) {
  const Endpoint e = Endpoint::parse("tcp://node2:29500");
  EXPECT_EQ(e.host, "node2");
  EXPECT_EQ(e.port, 29500);
  EXPECT_EQ(e.str(), "tcp://node2:29500");
  EXPECT_EQ(e.host_port(), "node2:29500");
  EXPECT_EQ(Endpoint::parse("10.0.0.7:5555"), (Endpoint{"10.0.0.7", 5555}));
  EXPECT_EQ(Endpoint::parse("tcp://[::1]:80").host, "[::1]");
  EXPECT_EQ(e.with_host("127.0.0.1").str(), "tcp://127.0.0.1:29500");
  EXPECT_EQ(e.with_port(1).str(), "tcp://node2:1");
}

TEST(CoreEndpoint, PortZeroOnlyWhereABindMayTakeAnyPort) {
  EXPECT_THROW(Endpoint::parse("tcp://*:0"), ConfigError);
  const Endpoint any = Endpoint::parse("tcp://*:0", /*allow_any_port=*/true);
  EXPECT_EQ(any.port, 0);
  EXPECT_TRUE(any.wildcard());
  EXPECT_FALSE(Endpoint::parse("tcp://node1:9").wildcard());
  EXPECT_TRUE(Endpoint::parse("tcp://0.0.0.0:9").wildcard());
}

TEST(CoreEndpoint, NamesTheTextThatIsNotAnEndpoint) {
  for (const char* bad :
       {"tcp://127.0.0.1", "tcp://127.0.0.1:", "127.0.0.1:99999", ":80", "host:8x", "tcp://h:123456"}) {
    try {
      Endpoint::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tcp://HOST:PORT"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tenax
