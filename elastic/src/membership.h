// The rendezvous service's decisions, apart from its sockets: which nodes form each generation,
// when a generation ends, who is declared dead. A pure state machine: messages and the time go
// in (handle, tick), messages come out (an outbox of (routing id, message) pairs); the ZeroMQ
// thread of rendezvous_service.cpp only pumps. So every rule, failover and false alarms
// included, is tested deterministically with a made-up clock (tests/elastic/membership_test.cpp),
// without sockets or sleeps.
//
// The rules are those of rendezvous_service.h (generations, last call, join timeout,
// re-rendezvous, finishing). Two effects leave the state machine through injected functions,
// because their answer decides what is sent next and both are cheap local calls:
//   claim_generation(g) → the number to use (>= g) or an error: the job's generation fence
//     (generation_fence.h) moves before any ASSIGN of a generation goes out, so that a stale
//     service (a rendezvous host that was partitioned away and replaced) cannot hand out a
//     generation whose checkpoints would compete with the current one's;
//   drop_store_prefix(prefix): the previous generation's keys in the key-value store.
//
// Thread-safety: none; one thread (the service's) owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous_protocol.h"
#include "tenax/core/status.h"
#include "tenax/elastic/rendezvous_service.h"

namespace spdlog {
class logger;
}

namespace tenax::elastic::detail {

struct Outgoing {
  std::string routing_id;
  ServiceMessage message;
};
using Outbox = std::vector<Outgoing>;

struct MembershipHooks {
  /// Moves the job's generation fence to `generation`; returns the number to use (the fence may
  /// already be past it) or an error (the service then forms nothing and says why).
  std::function<StatusOr<std::int64_t>(std::int64_t generation)> claim_generation;
  std::function<void(const std::string& prefix)> drop_store_prefix;
};

class Membership {
 public:
  using Clock = std::chrono::steady_clock;

  /// `store_endpoint` goes into every ASSIGN. Hooks left empty do nothing (claim: accepted).
  Membership(RendezvousOptions options, std::string store_endpoint, MembershipHooks hooks = {});

  /// One decoded message from the peer behind `routing_id`.
  Outbox handle(const std::string& routing_id, const AgentMessage& message, Clock::time_point now);
  /// The clocks: expiry of silent nodes, the last-call window, the join timeout. Call it at
  /// least every tick_interval(): a longer gap between calls is taken for a stall of the
  /// service itself (its host paused), which is not held against the nodes.
  Outbox tick(Clock::time_point now);

  /// Numbering goes on above `generation` (a takeover host knows the last one formed).
  void number_above(std::int64_t generation);

  /// The state for snapshot(); refused_peers and malformed_messages are the pump's to fill.
  RendezvousSnapshot snapshot() const;
  /// True when snapshot() changed since the last clear_dirty().
  bool dirty() const { return dirty_; }
  void clear_dirty() { dirty_ = false; }

  /// How often tick() must run for deaths to be declared within a fifth of an interval.
  std::chrono::milliseconds tick_interval() const;

 private:
  struct Node {
    std::string id;
    std::string host;
    int local_workers = 1;
    int master_port = 0;     // offered in its latest JOIN: MASTER_PORT if it becomes node rank 0
    std::string routing_id;  // return address of the node's current socket
    Clock::time_point last_seen;
    Clock::duration longest_silence{};  // between two of its messages, while alive
  };
  struct Generation {
    std::int64_t number = 0;
    std::vector<std::string> members;  // node ids in rank order
    std::map<std::string, Assignment> assignments;
    int world_size = 0;
    bool restart = false;
    std::string reason;
    std::vector<std::string> finished;  // members whose workers all finished (FINISHED), in order
  };

  void on(const std::string& routing_id, const JoinMsg& m, Clock::time_point now);
  void on(const std::string& routing_id, const HeartbeatMsg& m, Clock::time_point now);
  void on(const std::string& routing_id, const ResumeStepMsg& m, Clock::time_point now);
  void on(const std::string& routing_id, const RestartMsg& m, Clock::time_point now);
  void on(const std::string& routing_id, const LeaveMsg& m, Clock::time_point now);
  void on(const std::string& routing_id, const FinishedMsg& m, Clock::time_point now);

  Node& touch(const std::string& routing_id, const std::string& node_id, Clock::time_point now);
  void forget(const std::string& node_id);
  bool is_member(const std::string& node_id) const;
  PulseMsg pulse_for(const std::string& node_id, std::int64_t generation) const;
  void add_waiting(const std::string& node_id);
  void remove_waiting(const std::string& node_id);
  void request_restart(const std::string& reason);
  bool round_active() const { return !running_ || running_->restart; }
  void forgive_own_stall(Clock::time_point now);
  void run_clocks(Clock::time_point now);
  void expire_silent_nodes(Clock::time_point now);
  void update_round_clocks(Clock::time_point now);
  int outstanding() const;
  void form();
  void fail_round(const std::string& message);
  void send(const Node& node, ServiceMessage message);
  void send_to(const std::string& routing_id, ServiceMessage message);

  const RendezvousOptions options_;
  const std::string store_endpoint_;
  MembershipHooks hooks_;
  Outbox outbox_;  // filled by the handlers, handed out by handle()/tick()

  std::map<std::string, Node> nodes_;  // every live agent, by node id
  std::vector<std::string> waiting_;   // node ids in join order
  std::optional<Generation> running_;  // the last generation formed
  std::int64_t next_generation_ = 0;
  std::optional<Clock::time_point> round_opened_;
  std::optional<Clock::time_point> min_reached_;
  std::int64_t resume_step_;
  std::uint64_t nodes_lost_ = 0;
  Clock::duration longest_silence_{};  // of nodes that left or finished (alive until then)
  std::string last_failure_;
  bool dirty_ = true;
  Clock::time_point last_call_{};  // forgive_own_stall()
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace tenax::elastic::detail
