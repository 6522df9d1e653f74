// The rendezvous service: decides which nodes form each generation, assigns their ranks, and
// watches them through heartbeats. Hosted by the agent on the job's first node (or by
// `tenax rdzv`), never by a rank, so that it outlives any worker.
//
// Generations. Agents (one per node) JOIN with their node id, host and number of local workers.
// A round opens when the first agent joins while no generation runs; it closes when max_nodes
// have joined or, once min_nodes have, after the last-call window (and after every live node of
// the previous generation has re-joined, or at the latest at the join timeout). If fewer than
// min_nodes joined within the join timeout, the round fails: every waiting agent gets FAILED
// naming min_nodes, how many joined and who. The generation that forms takes the first
// max_nodes joiners; ranks are assigned in node-id order (node rank k gets the ranks after
// those of nodes 0..k-1), so the same nodes get the same ranks in every generation.
// Generation numbers count formed generations: 0, 1, 2, ...
//
// Re-rendezvous. While generation g runs, it ends (a re-rendezvous is requested) when a member
// misses heartbeats for interval × liveness, leaves, asks for it (RESTART: e.g. a worker died),
// re-joins, or when a new agent joins and g has fewer than max_nodes (a joiner beyond max_nodes
// waits as a spare without disturbing g). Members learn it at once (a PULSE with state
// "restart" and the reason is pushed to every live member, and repeated in every heartbeat
// reply), stop their workers and JOIN again; the next round then forms g + 1 from the nodes
// that joined.
//
// Finishing. A member whose workers all exited 0 sends FINISHED: it leaves without ending the
// generation (unlike LEAVE), so members finishing one after another never restart the others;
// while a generation has finished members, a new joiner waits as a spare. If a member still
// running fails later, the re-rendezvous goes on without the finished nodes. The hosting agent
// waits until `live` in the snapshot is empty before it stops the service.
//
// Key-value store. The service owns a KvService in the same process, bound to its own port
// (ASSIGN carries its endpoint): the store's traffic (every worker, bursty, with parked
// GET/WAIT requests) stays off the membership socket, so that heartbeats never queue behind a
// store storm, and the KV protocol stays as it is. Keys are namespaced per generation
// ("gen/<g>/"); when generation g forms, the previous generation's keys are dropped. Only the
// service thread talks to the KvService between start() and stop().
//
// Thread-safety: start/stop/endpoint/store_endpoint from one owning thread; snapshot() from
// any thread. The sockets live on the service's own thread. The destructor never waits on a
// peer (linger 0).
//
//   tenax::elastic::RendezvousService service(
//       tenax::elastic::RendezvousOptions(2, 4).last_call(std::chrono::seconds(3)));
//   std::string endpoint = service.start("tcp://*:29400");   // "tcp://0.0.0.0:29400"
//   ... agents connect RendezvousClient(endpoint with this host's name, ...) ...
//   service.stop();
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tenax/core/status.h"
#include "tenax/elastic/job_keys.h"
#include "tenax/elastic/rendezvous.h"

namespace tenax::elastic {

inline constexpr std::chrono::milliseconds kDefaultLastCall = std::chrono::seconds(3);
inline constexpr std::chrono::milliseconds kDefaultJoinTimeout = std::chrono::seconds(300);

/// How generations form. Throws ConfigError naming the option when a value is invalid.
class RendezvousOptions {
 public:
  /// 1 <= min_nodes <= max_nodes <= 65536.
  RendezvousOptions(int min_nodes, int max_nodes);

  /// Once min_nodes have joined, how long to wait for more (>= 0).
  RendezvousOptions& last_call(std::chrono::milliseconds value);
  /// From the round's first join: fail it if fewer than min_nodes joined by then (> 0).
  RendezvousOptions& join_timeout(std::chrono::milliseconds value);
  RendezvousOptions& heartbeat(const HeartbeatOptions& value);
  /// The resume step carried by ASSIGN until an agent sets another (opaque to the service).
  RendezvousOptions& resume_step(std::int64_t value);
  /// CURVE on both sockets (membership and store): only peers holding the job's client key get
  /// in; the others are refused and logged. Unset: no encryption, anyone may connect.
  RendezvousOptions& keys(JobKeys value);
  /// Numbers generations above `value` (a host taking over from another knows the last one
  /// formed, from the lease); -1: from 0.
  RendezvousOptions& generations_above(std::int64_t value);
  /// Asked before any ASSIGN of generation g goes out: the number to use (>= g) or an error that
  /// fails the round (the job's generation fence; see membership.h). Unset: g.
  RendezvousOptions& claim_generation(std::function<StatusOr<std::int64_t>(std::int64_t)> value);

  int min_nodes() const { return min_nodes_; }
  int max_nodes() const { return max_nodes_; }
  std::chrono::milliseconds last_call() const { return last_call_; }
  std::chrono::milliseconds join_timeout() const { return join_timeout_; }
  const HeartbeatOptions& heartbeat() const { return heartbeat_; }
  std::int64_t resume_step() const { return resume_step_; }
  const std::optional<JobKeys>& keys() const { return keys_; }
  std::int64_t generations_above() const { return generations_above_; }
  const std::function<StatusOr<std::int64_t>(std::int64_t)>& claim_generation() const { return claim_generation_; }

  /// Compares the values; claim_generation (a function) is not compared.
  bool operator==(const RendezvousOptions& o) const {
    return min_nodes_ == o.min_nodes_ && max_nodes_ == o.max_nodes_ && last_call_ == o.last_call_ &&
           join_timeout_ == o.join_timeout_ && heartbeat_ == o.heartbeat_ && resume_step_ == o.resume_step_ &&
           keys_ == o.keys_ && generations_above_ == o.generations_above_;
  }
  bool operator!=(const RendezvousOptions& o) const { return !(*this == o); }

 private:
  int min_nodes_;
  int max_nodes_;
  std::chrono::milliseconds last_call_ = kDefaultLastCall;
  std::chrono::milliseconds join_timeout_ = kDefaultJoinTimeout;
  HeartbeatOptions heartbeat_;
  std::int64_t resume_step_ = 0;
  std::optional<JobKeys> keys_;
  std::int64_t generations_above_ = -1;
  std::function<StatusOr<std::int64_t>(std::int64_t)> claim_generation_;
};

/// The service's state as last published by its thread (for logs, `tenax rdzv`, tests).
struct RendezvousSnapshot {
  std::int64_t generation = -1;      ///< the last generation formed; -1 before the first
  std::vector<std::string> members;  ///< its node ids in rank order
  int world_size = 0;                ///< its workers
  bool restart_requested = false;    ///< it is ending: a re-rendezvous was requested
  std::string restart_reason;
  std::vector<std::string> finished;  ///< its node ids that reported FINISHED, in that order
  std::vector<std::string> live;      ///< node ids the service hears from (sorted)
  std::vector<std::string> waiting;   ///< node ids waiting for the next generation, join order
  std::int64_t resume_step = 0;
  std::uint64_t nodes_lost = 0;  ///< nodes declared dead after missed heartbeats
  /// The longest gap between two messages of a node that was not declared dead (a healthy node's
  /// worst silence: the measurement behind the heartbeat defaults; docs/launcher-and-slurm.md,
  /// "What each fault costs").
  std::int64_t longest_silence_ms = 0;
  std::uint64_t malformed_messages = 0;  ///< messages dropped as malformed
  std::uint64_t refused_peers = 0;       ///< connections refused for want of the job's keys (both sockets)
  std::string last_failure;              ///< the message of the last failed round ("" if none)
};

class RendezvousService {
 public:
  explicit RendezvousService(RendezvousOptions options);
  ~RendezvousService();  ///< stop(); never waits on peers
  RendezvousService(const RendezvousService&) = delete;
  RendezvousService& operator=(const RendezvousService&) = delete;

  /// Binds the membership socket at `bind_endpoint` and the key-value store at
  /// `store_bind_endpoint` (empty: the same interface, any free port), and starts serving.
  /// Port 0 = any free port. Returns the bound rendezvous endpoint. Throws RendezvousError
  /// when it cannot bind or already serves.
  std::string start(const std::string& bind_endpoint, const std::string& store_bind_endpoint = "");
  /// Stops serving (both sockets) and joins the thread. Idempotent; does not wait on peers.
  void stop();
  /// The bound endpoints ("" before start).
  std::string endpoint() const;
  std::string store_endpoint() const;
  const RendezvousOptions& options() const;
  /// A copy of the state the service thread last published; it is published before any
  /// message that reflects it is sent, so an agent's news is already visible here.
  RendezvousSnapshot snapshot() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tenax::elastic
