// The rendezvous key-value service: a ZeroMQ ROUTER that serves the Store operations
// (set/get/add/wait) to ZmqStoreClient instances in worker processes.
//
// Hosted by the launcher agent (never by a rank, so that it outlives any worker), on its own
// background thread which owns the socket. Keys persist across generations; generations use
// distinct prefixes, and drop_prefix() frees an old generation's keys.
// Thread-safety: start/stop/drop_prefix/endpoint may be called from any one owning thread.
//
//   tenax::elastic::KvService service;
//   std::string endpoint = service.start("tcp://127.0.0.1:0");   // "tcp://127.0.0.1:45123"
//   ...
//   service.stop();
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "tenax/elastic/job_keys.h"

namespace tenax::elastic {

class KvService {
 public:
  /// With `keys`, the store speaks CURVE and admits only clients holding the job's client key
  /// (job_keys.h); without, anyone who reaches the port may use it.
  explicit KvService(std::optional<JobKeys> keys = std::nullopt);
  ~KvService();  ///< stops the thread if still running (linger 0; never waits on peers)
  KvService(const KvService&) = delete;
  KvService& operator=(const KvService&) = delete;

  /// Binds `bind_endpoint` (port 0 = any free port) and starts serving. Returns the bound
  /// endpoint with the real port. Throws RendezvousError when it cannot bind.
  std::string start(const std::string& bind_endpoint);
  /// Stops serving and joins the thread. Idempotent.
  void stop();
  /// Removes every key that starts with `prefix` (e.g. an old generation's "gen/3/").
  void drop_prefix(const std::string& prefix);
  /// The bound endpoint ("" before start).
  std::string endpoint() const;
  /// Peers refused for want of the job's keys since start() (always 0 without keys).
  std::uint64_t refused_peers() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// A Store backed by a remote KvService (ZeroMQ DEALER). Throws RendezvousError when the
/// service does not answer within `connect_timeout`, which also bounds every later set()/add()
/// round trip (TimeoutError). get()/wait() are bounded by their own timeout (plus at most
/// 100 ms for the service's answer in transit) and throw TimeoutError naming the missing keys.
/// Thread-safety: one thread at a time (it owns a ZeroMQ socket).
/// With `keys` the connection is CURVE-encrypted and authenticated (the service must have them
/// too); a client without the service's keys is refused and sees the connect timeout.
std::unique_ptr<class Store> connect_store(const std::string& endpoint, std::chrono::milliseconds connect_timeout,
                                           const std::optional<JobKeys>& keys = std::nullopt);

}  // namespace tenax::elastic
