#include "rendezvous_protocol.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "kv_protocol.h"

namespace tenax::elastic {
namespace {

using namespace detail;

template <typename T>
T round_trip_agent(const T& in) {
  std::string why;
  const auto out = decode_agent_message(encode(AgentMessage{in}), why);
  EXPECT_TRUE(out.has_value()) << why;
  EXPECT_TRUE(out && std::holds_alternative<T>(*out));
  return out && std::holds_alternative<T>(*out) ? std::get<T>(*out) : T{};
}

template <typename T>
T round_trip_service(const T& in) {
  std::string why;
  const auto out = decode_service_message(encode(ServiceMessage{in}), why);
  EXPECT_TRUE(out.has_value()) << why;
  EXPECT_TRUE(out && std::holds_alternative<T>(*out));
  return out && std::holds_alternative<T>(*out) ? std::get<T>(*out) : T{};
}

std::string rejected_agent(const Frames& frames) {
  std::string why;
  EXPECT_FALSE(decode_agent_message(frames, why).has_value());
  EXPECT_FALSE(why.empty());
  return why;
}

TEST(ElasticRendezvousProtocol, AgentMessagesRoundTrip) {
  const auto join = round_trip_agent(JoinMsg{"node-7", "host-7.cluster", 8, 41, 29517});
  EXPECT_EQ(join.node, "node-7");
  EXPECT_EQ(join.host, "host-7.cluster");
  EXPECT_EQ(join.local_workers, 8);
  EXPECT_EQ(join.last_generation, 41);
  EXPECT_EQ(join.master_port, 29517);
  EXPECT_EQ(round_trip_agent(HeartbeatMsg{"n", -1}).generation, -1);
  EXPECT_EQ(round_trip_agent(ResumeStepMsg{"n", -123456789012345}).step, -123456789012345);
  const auto restart = round_trip_agent(RestartMsg{"n", 3, ""});
  EXPECT_EQ(restart.generation, 3);
  EXPECT_EQ(restart.reason, "");
  EXPECT_EQ(round_trip_agent(LeaveMsg{"leaving"}).node, "leaving");
  const auto finished = round_trip_agent(FinishedMsg{"done", 6});
  EXPECT_EQ(finished.node, "done");
  EXPECT_EQ(finished.generation, 6);
}

TEST(ElasticRendezvousProtocol, ServiceMessagesRoundTrip) {
  Assignment a;
  a.generation = 5;
  a.node_rank = 1;
  a.num_nodes = 3;
  a.rank_offset = 4;
  a.local_world_size = 2;
  a.world_size = 7;
  a.resume_step = 900;
  a.store_prefix = "gen/5/";
  a.store_endpoint = "tcp://0.0.0.0:4000";
  a.master_host = "node-0";
  a.master_port = 41234;
  EXPECT_EQ(round_trip_service(AssignMsg{a}).assignment, a);
  const auto wait = round_trip_service(WaitMsg{2, 1, 2, 4});
  EXPECT_EQ(wait.next_generation, 2);
  EXPECT_EQ(wait.max_nodes, 4);
  const auto pulse = round_trip_service(PulseMsg{PulseState::kRestart, 4, "node 'b' left"});
  EXPECT_EQ(pulse.state, PulseState::kRestart);
  EXPECT_EQ(pulse.reason, "node 'b' left");
  EXPECT_EQ(round_trip_service(FailedMsg{"too few"}).message, "too few");
  const auto ack = round_trip_service(AckMsg{RdzvType::kResumeStep, 77});
  EXPECT_EQ(ack.of, RdzvType::kResumeStep);
  EXPECT_EQ(ack.value, 77);
}

TEST(ElasticRendezvousProtocol, MalformedAgentMessagesAreRejectedWithAReason) {
  const Frames join = encode(AgentMessage{JoinMsg{"node", "host", 2, -1}});
  EXPECT_NE(rejected_agent({}).find("empty"), std::string::npos);
  EXPECT_NE(rejected_agent({"x"}).find("header"), std::string::npos);
  EXPECT_NE(rejected_agent({std::string{char(9), char(1)}}).find("version"), std::string::npos);
  EXPECT_NE(rejected_agent({std::string{char(2), char(77)}}).find("type 77"), std::string::npos);
  // A service message sent to the service.
  EXPECT_NE(rejected_agent(encode(ServiceMessage{FailedMsg{"x"}})).find("type 104"), std::string::npos);

  Frames short_join(join.begin(), join.end() - 1);
  EXPECT_NE(rejected_agent(short_join).find("expected 5 field(s)"), std::string::npos);
  Frames long_join = join;
  long_join.push_back("extra");
  EXPECT_NE(rejected_agent(long_join).find("got 6"), std::string::npos);
  // A version-1 agent (no master_port) is told the version, not a field count.
  Frames v1_join(join.begin(), join.end() - 1);
  v1_join[0][0] = char(1);
  EXPECT_NE(rejected_agent(v1_join).find("protocol version 1, expected 2"), std::string::npos);
  Frames bad_port = join;
  bad_port[5] = encode_i64(65536);
  EXPECT_NE(rejected_agent(bad_port).find("master_port=65536 is out of range"), std::string::npos);

  Frames bad_int = join;
  bad_int[3] = "1234567";
  EXPECT_NE(rejected_agent(bad_int).find("local_workers must be an 8-byte integer"), std::string::npos);
  Frames zero_workers = join;
  zero_workers[3] = encode_i64(0);
  EXPECT_NE(rejected_agent(zero_workers).find("local_workers=0 is out of range"), std::string::npos);
  Frames old_generation = join;
  old_generation[4] = encode_i64(-2);
  EXPECT_NE(rejected_agent(old_generation).find("last_generation=-2"), std::string::npos);
  Frames empty_node = join;
  empty_node[1] = "";
  EXPECT_NE(rejected_agent(empty_node).find("node id must be 1..200 bytes, got 0"), std::string::npos);
  Frames long_host = join;
  long_host[2] = std::string(201, 'h');
  EXPECT_NE(rejected_agent(long_host).find("host must be 1..200 bytes, got 201"), std::string::npos);
}

TEST(ElasticRendezvousProtocol, InconsistentAssignIsRejected) {
  Assignment a;
  a.node_rank = 2;
  a.num_nodes = 2;
  a.store_prefix = "gen/0/";
  a.store_endpoint = "tcp://h:1";
  a.master_host = "h";
  std::string why;
  EXPECT_FALSE(decode_service_message(encode(ServiceMessage{AssignMsg{a}}), why).has_value());
  EXPECT_NE(why.find("inconsistent ranks"), std::string::npos) << why;
}

TEST(ElasticRendezvousProtocol, PrintableEscapesBinaryAndCuts) {
  EXPECT_EQ(printable(std::string("a\0b\\", 4)), "a\\x00b\\x5c");
  EXPECT_EQ(printable(std::string(100, 'x'), 8), "xxxxxxxx...");
}

}  // namespace
}  // namespace tenax::elastic
