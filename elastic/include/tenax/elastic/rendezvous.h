// Types shared by the rendezvous service (rendezvous_service.h) and its client
// (rendezvous_client.h): heartbeat timing, and the assignment a node receives when a generation
// forms.
//
// Heartbeats are Paranoid Pirate style (zguide chapter 4), ping-pong: the agent sends one every
// `interval`, the service answers each. Either side declares the other dead after
// `interval × liveness` of silence. With the defaults (500 ms × 5 = 2.5 s, the service sweeping
// every interval / 5 = 100 ms) a dead agent is declared dead at most 2.6 s after its last beat,
// hence within 2.6 s of its death, and the surviving agents are told at that moment.
// Thread-safety: values; no shared state.
//
//   auto heartbeat = tenax::elastic::HeartbeatOptions().interval(std::chrono::milliseconds(100));
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tenax::elastic {

inline constexpr std::chrono::milliseconds kDefaultHeartbeatInterval{500};
inline constexpr int kDefaultHeartbeatLiveness = 5;

/// Heartbeat timing; both sides of a rendezvous must use the same values.
class HeartbeatOptions {
 public:
  /// Time between two heartbeats (at least 10 ms; ConfigError otherwise).
  HeartbeatOptions& interval(std::chrono::milliseconds value);
  /// Beats missed in a row before the peer is declared dead (at least 2; ConfigError otherwise).
  HeartbeatOptions& liveness(int value);

  std::chrono::milliseconds interval() const { return interval_; }
  int liveness() const { return liveness_; }
  /// interval × liveness: the silence after which a peer is dead.
  std::chrono::milliseconds expiry() const { return interval_ * liveness_; }

  bool operator==(const HeartbeatOptions& other) const {
    return interval_ == other.interval_ && liveness_ == other.liveness_;
  }
  bool operator!=(const HeartbeatOptions& other) const { return !(*this == other); }

 private:
  std::chrono::milliseconds interval_ = kDefaultHeartbeatInterval;
  int liveness_ = kDefaultHeartbeatLiveness;
};

/// What one node learns when a generation forms (the ASSIGN message).
struct Assignment {
  std::int64_t generation = 0;
  int node_rank = 0;             ///< this node's index among the generation's nodes (GROUP_RANK)
  int num_nodes = 1;             ///< nodes in the generation (GROUP_WORLD_SIZE)
  int rank_offset = 0;           ///< global rank of this node's local worker 0
  int local_world_size = 1;      ///< this node's workers, as it announced in JOIN
  int world_size = 1;            ///< workers over all nodes (WORLD_SIZE)
  std::int64_t resume_step = 0;  ///< opaque to the service: the value last set by an agent
  std::string store_prefix;      ///< "gen/<generation>/": this generation's key namespace
  std::string store_endpoint;    ///< the key-value store (KvService) for this generation's workers
  std::string master_host;       ///< host of node rank 0 (MASTER_ADDR)
  /// A port node rank 0's agent found free on master_host when it joined (MASTER_PORT): where
  /// the workers' own store (PyTorch's TCPStore) is hosted by rank 0; 0 when it offered none.
  int master_port = 0;

  bool operator==(const Assignment& o) const {
    return generation == o.generation && node_rank == o.node_rank && num_nodes == o.num_nodes &&
           rank_offset == o.rank_offset && local_world_size == o.local_world_size && world_size == o.world_size &&
           resume_step == o.resume_step && store_prefix == o.store_prefix && store_endpoint == o.store_endpoint &&
           master_host == o.master_host && master_port == o.master_port;
  }
  bool operator!=(const Assignment& o) const { return !(*this == o); }
};

}  // namespace tenax::elastic
