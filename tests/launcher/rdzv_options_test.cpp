// `tenax rdzv` flags: values, defaults and the errors that name the flag.
#include "rdzv_command.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

using Args = std::vector<std::string>;

std::string error_of(const Args& args) {
  try {
    (void)parse_rdzv_options(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LauncherRdzvOptions, ParsesEveryFlag) {
  const RdzvOptions o = parse_rdzv_options(Args{"--nnodes", "1:4", "--host", "10.0.0.5", "--port=0", "--keys-file",
                                                "/shared/k", "--last-call", "5", "--join-timeout", "60",
                                                "--heartbeat-interval", "200", "--heartbeat-liveness", "3"});
  EXPECT_EQ(o.nodes, (NodeRange{1, 4}));
  EXPECT_EQ(o.host, "10.0.0.5");
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(o.keys_file, "/shared/k");
  EXPECT_EQ(o.last_call, std::chrono::seconds(5));
  EXPECT_EQ(o.join_timeout, std::chrono::seconds(60));
  EXPECT_EQ(o.heartbeat_interval, std::chrono::milliseconds(200));
  EXPECT_EQ(o.heartbeat_liveness, 3);
}

TEST(LauncherRdzvOptions, DefaultsServeEveryInterfaceOnTheUsualPort) {
  const RdzvOptions o = parse_rdzv_options(Args{"--nnodes", "2"});
  EXPECT_EQ(o.nodes, (NodeRange{2, 2}));
  EXPECT_EQ(o.host, "*");
  EXPECT_EQ(o.port, kDefaultRdzvPort);
  EXPECT_EQ(o.keys_file, "tenax-job.keys");
}

TEST(LauncherRdzvOptions, ErrorsNameTheCommandAndTheFlag) {
  EXPECT_NE(error_of({}).find("tenax rdzv: missing --nnodes"), std::string::npos) << error_of({});
  EXPECT_NE(error_of({"--nnodes", "3:2"}).find("MIN is above MAX"), std::string::npos);
  EXPECT_NE(error_of({"--nnodes", "2", "--port", "70000"}).find("--port must be at most 65535"), std::string::npos);
  EXPECT_NE(error_of({"--nnodes", "2", "--port", "x"}).find("--port expects"), std::string::npos);
  EXPECT_NE(error_of({"--nnodes", "2", "--bogus", "1"}).find("unknown argument '--bogus'"), std::string::npos);
  EXPECT_NE(error_of({"--nnodes"}).find("--nnodes needs a value"), std::string::npos);
  EXPECT_NE(error_of({"--nnodes", "2", "--heartbeat-liveness", "1"}).find("at least 2"), std::string::npos);
}

}  // namespace
}  // namespace tenax::launcher
