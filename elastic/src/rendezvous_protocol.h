// The wire protocol between RendezvousClient (a DEALER, one per agent) and RendezvousService
// (a ROUTER). Pure encoding and validation, no sockets: decode_* are total functions over any
// bytes, so that a malformed or hostile message is rejected with a reason, never a crash.
//
// A message is multipart. Frame 0 is a 2-byte header [version:u8 = 1][type:u8]; then the type's
// frames, exactly as many as listed. int frames are i64, 8 bytes little-endian; text frames are
// 1..kMaxNameBytes bytes (reasons and failure messages up to kMaxTextBytes, and may be empty).
// The ROUTER adds/strips the routing-id frame; no empty delimiter frame is used.
//
// Agent → service (frame 1 is always the node id; the routing id is only a return address):
//   JOIN         node host local_workers:int last_generation:int (-1: never assigned)
//                master_port:int (a port free on host for the workers' own store; 0: none)
//   HEARTBEAT    node generation:int
//   RESUME_STEP  node step:int
//   RESTART      node generation:int reason:text       (ask for a re-rendezvous)
//   LEAVE        node
//   FINISHED     node generation:int                    (this node's workers all finished:
//                it leaves without ending the generation for the others)
// Service → agent:
//   WAIT         next_generation:int joined:int min_nodes:int max_nodes:int
//   ASSIGN       generation node_rank num_nodes rank_offset local_world_size world_size
//                resume_step (all int) store_prefix store_endpoint master_host (text)
//                master_port:int (node rank 0's JOIN's master_port)
//   PULSE        state:int (0 ok, 1 restart, 2 unknown node) generation:int reason:text
//                (the answer to HEARTBEAT and RESTART)
//   FAILED       message:text                           (the round failed: join timeout)
//   ACK          of:int (the acknowledged type) value:int (RESUME_STEP: the step; LEAVE: 0;
//                FINISHED: the generation)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "tenax/elastic/rendezvous.h"

namespace tenax::elastic::detail {

// 2: JOIN and ASSIGN carry master_port (MASTER_PORT for PyTorch's own store).
inline constexpr std::uint8_t kRdzvVersion = 2;
inline constexpr std::size_t kMaxNameBytes = 200;  // leaves room in the 255-byte routing id
inline constexpr std::size_t kMaxTextBytes = 4096;
inline constexpr std::int64_t kMaxLocalWorkers = 4096;

enum class RdzvType : std::uint8_t {
  kJoin = 1,
  kHeartbeat = 2,
  kResumeStep = 3,
  kRestart = 4,
  kLeave = 5,
  kFinished = 6,
  kWait = 101,
  kAssign = 102,
  kPulse = 103,
  kFailed = 104,
  kAck = 105,
};

enum class PulseState : std::int64_t { kOk = 0, kRestart = 1, kUnknownNode = 2 };

struct JoinMsg {
  std::string node;
  std::string host;
  std::int64_t local_workers = 1;
  std::int64_t last_generation = -1;
  std::int64_t master_port = 0;
};
struct HeartbeatMsg {
  std::string node;
  std::int64_t generation = -1;
};
struct ResumeStepMsg {
  std::string node;
  std::int64_t step = 0;
};
struct RestartMsg {
  std::string node;
  std::int64_t generation = -1;
  std::string reason;
};
struct LeaveMsg {
  std::string node;
};
struct FinishedMsg {
  std::string node;
  std::int64_t generation = -1;
};
using AgentMessage = std::variant<JoinMsg, HeartbeatMsg, ResumeStepMsg, RestartMsg, LeaveMsg, FinishedMsg>;

struct WaitMsg {
  std::int64_t next_generation = 0;
  std::int64_t joined = 0;
  std::int64_t min_nodes = 0;
  std::int64_t max_nodes = 0;
};
struct AssignMsg {
  Assignment assignment;
};
struct PulseMsg {
  PulseState state = PulseState::kOk;
  std::int64_t generation = -1;
  std::string reason;
};
struct FailedMsg {
  std::string message;
};
struct AckMsg {
  RdzvType of = RdzvType::kResumeStep;
  std::int64_t value = 0;
};
using ServiceMessage = std::variant<WaitMsg, AssignMsg, PulseMsg, FailedMsg, AckMsg>;

using Frames = std::vector<std::string>;

Frames encode(const AgentMessage& message);
Frames encode(const ServiceMessage& message);

/// The message in `frames` (without a routing id), or nullopt with `why` saying what is wrong.
std::optional<AgentMessage> decode_agent_message(const Frames& frames, std::string& why);
std::optional<ServiceMessage> decode_service_message(const Frames& frames, std::string& why);

/// `bytes` with anything but printable ASCII as \xNN, cut to `limit` characters: for log lines
/// that quote what a peer sent.
std::string printable(const std::string& bytes, std::size_t limit = 64);

}  // namespace tenax::elastic::detail
