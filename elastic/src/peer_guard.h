// CURVE on the job's ZeroMQ sockets, and the guard that turns away peers without the job's keys.
//
// CURVE alone authenticates only the server: any client that knows the server's public key gets
// in unless a ZAP handler is bound in the same context (reference/libtorch-cpp-facts.md §6). The
// PeerGuard is that handler: it admits exactly the job's client public key. It also watches the
// server socket's handshakes, because a peer that speaks no CURVE at all, or encrypts to another
// server key, fails before ZAP is ever asked; both kinds of refusal are logged and counted.
//
// One PeerGuard per ZeroMQ context (ZAP's endpoint is per context), created before the server
// socket binds, destroyed after the server thread stopped using the socket.
// Thread-safety: construct and destroy on the owning thread; the counter is atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include <zmq.hpp>

#include "tenax/elastic/job_keys.h"

namespace tenax::elastic::detail {

/// Client side: encrypt to the job's server key and present the job's client key. Call before
/// connect().
void make_curve_client(zmq::socket_t& socket, const JobKeys& keys);

class PeerGuard {
 public:
  /// Makes `server_socket` a CURVE server with the job's server key (call before it binds),
  /// binds the context's ZAP handler and starts watching. `service` names the socket in logs
  /// ("rendezvous service", "key-value store"); each refused peer adds one to `refused`.
  PeerGuard(zmq::context_t& context, zmq::socket_t& server_socket, const JobKeys& keys, std::string service,
            std::shared_ptr<std::atomic<std::uint64_t>> refused);
  ~PeerGuard();  ///< stops the guard's thread; never waits on a peer
  PeerGuard(const PeerGuard&) = delete;
  PeerGuard& operator=(const PeerGuard&) = delete;

 private:
  zmq::socket_t control_;
  std::thread thread_;
};

}  // namespace tenax::elastic::detail
