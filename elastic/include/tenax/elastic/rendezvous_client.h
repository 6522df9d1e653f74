// The agent's side of the rendezvous (rendezvous_service.h): join a generation, keep
// heartbeating, learn when the generation ends.
//
// A background thread owns the DEALER socket. From construction to destruction it sends a
// heartbeat every interval while the node is joining or in a generation (JOIN is resent while
// joining, HEARTBEAT while assigned), and watches the service's answers: after interval ×
// liveness of silence it closes the socket and reconnects with a new one (a fresh routing id,
// so nothing queued for the old connection is replayed), backing off from one interval up to
// reconnect_backoff_max; after service_timeout of silence the service is lost for good
// (status UNAVAILABLE) and the agent must decide (the job cannot re-rendezvous without it).
// Heartbeats go on while the agent stops its workers, so a slow shutdown is not mistaken for a
// dead node.
//
// Status codes (tenax/core/status.h): ABORTED = the generation ended; stop the workers and
// join() again. UNAVAILABLE = the service is lost. FAILED_PRECONDITION = the service failed
// the round (too few nodes by the join timeout), or a call that needs a generation was made
// without one. DEADLINE_EXCEEDED = the call's own timeout passed.
//
// Thread-safety: every method may be called from any thread; the socket stays on the client's
// thread. The destructor sends nothing and never waits on the service (linger 0): a destroyed
// client looks like a dead node to the service, which notices through missed heartbeats.
//
//   tenax::elastic::RendezvousClient client(endpoint, {"node-03", "node-03.cluster", 4});
//   auto assigned = client.join(std::chrono::minutes(5));
//   if (!assigned.is_ok()) throw tenax::RendezvousError(assigned.status().to_string());
//   start_workers(assigned.value());       // ranks rank_offset .. rank_offset + 3
//   while (client.watch(kPollInterval).is_ok()) { ... watch the workers ... }
//   stop_workers();                        // then join() again for the next generation
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tenax/core/status.h"
#include "tenax/elastic/rendezvous.h"
#include "tenax/elastic/rendezvous_service.h"

namespace tenax::elastic {

inline constexpr std::chrono::milliseconds kDefaultReconnectBackoffMax = std::chrono::seconds(4);
inline constexpr std::chrono::milliseconds kDefaultServiceTimeout = std::chrono::seconds(30);
/// Default deadline for set_resume_step(), request_restart() and leave().
inline constexpr std::chrono::milliseconds kDefaultRendezvousRequestTimeout = std::chrono::seconds(10);

/// Who this agent is. Throws ConfigError naming the option when a value is invalid.
class RendezvousClientOptions {
 public:
  /// `node_id`: unique in the job, 1..200 bytes; it orders the ranks (e.g. "<host>/<procid>").
  /// `host`: where this node's workers can be reached (MASTER_ADDR when it is node rank 0).
  /// `local_workers`: 1..4096.
  RendezvousClientOptions(std::string node_id, std::string host, int local_workers);

  RendezvousClientOptions& heartbeat(const HeartbeatOptions& value);
  /// The longest wait between two reconnection attempts (>= the heartbeat interval).
  RendezvousClientOptions& reconnect_backoff_max(std::chrono::milliseconds value);
  /// Silence after which the service is lost for good (> interval × liveness).
  RendezvousClientOptions& service_timeout(std::chrono::milliseconds value);
  /// CURVE with the job's keys (the service must use the same); unset: plain TCP.
  RendezvousClientOptions& keys(JobKeys value);
  /// The last generation this node was in (-1: none), carried by its JOINs: a new rendezvous
  /// host (failover) numbers its generations above it.
  RendezvousClientOptions& last_generation(std::int64_t value);

  const std::string& node_id() const { return node_id_; }
  const std::string& host() const { return host_; }
  int local_workers() const { return local_workers_; }
  const HeartbeatOptions& heartbeat() const { return heartbeat_; }
  std::chrono::milliseconds reconnect_backoff_max() const { return reconnect_backoff_max_; }
  std::chrono::milliseconds service_timeout() const { return service_timeout_; }
  const std::optional<JobKeys>& keys() const { return keys_; }
  std::int64_t last_generation() const { return last_generation_; }

  /// Throws ConfigError when the timing options contradict each other (RendezvousClient calls
  /// it): backoff below the interval, or a service timeout not beyond interval x liveness.
  void validate() const;

  bool operator==(const RendezvousClientOptions& o) const {
    return node_id_ == o.node_id_ && host_ == o.host_ && local_workers_ == o.local_workers_ &&
           heartbeat_ == o.heartbeat_ && reconnect_backoff_max_ == o.reconnect_backoff_max_ &&
           service_timeout_ == o.service_timeout_ && keys_ == o.keys_ && last_generation_ == o.last_generation_;
  }
  bool operator!=(const RendezvousClientOptions& o) const { return !(*this == o); }

 private:
  std::string node_id_;
  std::string host_;
  int local_workers_;
  HeartbeatOptions heartbeat_;
  std::chrono::milliseconds reconnect_backoff_max_ = kDefaultReconnectBackoffMax;
  std::chrono::milliseconds service_timeout_ = kDefaultServiceTimeout;
  std::optional<JobKeys> keys_;
  std::int64_t last_generation_ = -1;
};

class RendezvousClient {
 public:
  /// Starts the client's thread, which connects at once but sends nothing before join(). Throws
  /// RendezvousError for an endpoint ZeroMQ cannot parse, ConfigError for contradictory options.
  RendezvousClient(std::string endpoint, RendezvousClientOptions options);
  ~RendezvousClient();  ///< stops the thread; sends nothing, never waits on the service
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  /// Joins the next generation and waits for its ASSIGN. The store endpoint in the answer is
  /// reachable from this node (a wildcard host is replaced by the rendezvous endpoint's host).
  /// FAILED_PRECONDITION: the service failed the round (the message names min, count, who);
  /// UNAVAILABLE: the service is lost; DEADLINE_EXCEEDED: `timeout` passed (the client then
  /// stops joining and the service forgets the node after interval × liveness).
  /// `master_port`: a port free on this node's host, offered for the workers' own store
  /// (PyTorch's TCPStore on rank 0); the generation's Assignment::master_port is node rank 0's
  /// offer (0: none offered). ConfigError when it is not in 0..65535.
  StatusOr<Assignment> join(std::chrono::milliseconds timeout = kDefaultJoinTimeout, int master_port = 0);

  /// OK while this node's generation stands; ABORTED once it ended (the message says why),
  /// UNAVAILABLE when the service is lost, FAILED_PRECONDITION when not in a generation.
  Status status() const;
  /// Waits until status() is no longer OK or `timeout` passes; returns status().
  Status watch(std::chrono::milliseconds timeout);

  /// Stores the step the next generation resumes from (opaque to the service), waiting for
  /// the service's acknowledgement.
  Status set_resume_step(std::int64_t step, std::chrono::milliseconds timeout = kDefaultRendezvousRequestTimeout);
  /// Asks the service to end this node's generation (e.g. a local worker died); returns once
  /// the service confirmed, after which status() is ABORTED.
  Status request_restart(const std::string& reason,
                         std::chrono::milliseconds timeout = kDefaultRendezvousRequestTimeout);
  /// Tells the service this node is gone (its generation, if any, ends) and stops heartbeating.
  Status leave(std::chrono::milliseconds timeout = kDefaultRendezvousRequestTimeout);
  /// Tells the service this node's workers all finished: like leave(), but the generation goes
  /// on for the other members (they are not asked to restart). Without a generation: leave().
  Status finish(std::chrono::milliseconds timeout = kDefaultRendezvousRequestTimeout);

  const std::string& endpoint() const;
  const RendezvousClientOptions& options() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tenax::elastic
