// The Gloo full mesh of one communicator, connected here rather than by Gloo's
// rendezvous::Context::connectFullMesh so that another thread can cut it (AbortSignal, issue
// 33: nobody waits on a dead peer). Gloo offers no way to cancel a call in flight, and its
// connectFullMesh keeps the pairs to itself until every one is connected; a rank that listens
// for a peer which died before connecting would wait out the whole connect timeout.
//
// cut() makes every pending and later call fail as if each peer had closed its connection:
//   - a pair still connecting is closed (Gloo's Pair::close wakes the wait for the connection);
//   - a connected pair's socket is shut down, through a duplicate of its descriptor taken when
//     it connected: Gloo's own event loop then sees the connection end, fails the operations
//     waiting on it, and the peer at the other end sees it end too;
//   - every wait of a collective in flight ends, and every later call throws (the buffers Gloo's
//     collectives make are wrapped, gloo_mesh.cpp's CuttableContext): Gloo's own failure wakes
//     the buffers still waiting for their peer's notice, but not a send already queued on the
//     socket nor a receive whose message had begun to arrive, which waited out the collective's
//     whole timeout (120 s) while the peers' next generation waited for them.
// The store holds each rank's pair addresses under "rank_<r>" (one address per other rank, in
// rank order), as connectFullMesh does; only Tenax's own ranks read them.
// Thread-safety: connect() on one thread, once; cut() from any thread at any time.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include <gloo/rendezvous/context.h>
#include <gloo/transport/device.h>

#include "tenax/core/unique_fd.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic::detail {

class CuttableContext;

class GlooMesh final : public gloo::rendezvous::Context {
 public:
  GlooMesh(int rank, int size) : gloo::rendezvous::Context(rank, size) {}

  /// Connects a pair to every other rank through `store` by `deadline`. Throws TimeoutError
  /// (a peer did not arrive in time), PeerLostError (a connection failed, or cut() was called:
  /// the message then says so).
  void connect(Store& store, const std::shared_ptr<gloo::transport::Device>& device,
               std::chrono::steady_clock::time_point deadline);
  /// Fails every pending and later operation on the mesh (see above). Idempotent.
  void cut();
  bool was_cut() const;

 private:
  void wait_for_key(Store& store, const std::string& key, std::chrono::steady_clock::time_point deadline);
  /// Duplicates of the connected pairs' sockets (cut() shuts them down). Out of line: named by
  /// tests/tsan.supp.
  [[gnu::noinline]] void hold_sockets(gloo::transport::Context& pairs);

  mutable std::mutex mutex_;
  std::shared_ptr<gloo::transport::Context> pairs_;  // while connecting; then transportContext_
  std::shared_ptr<CuttableContext> cuttable_;        // transportContext_, once connected
  std::vector<UniqueFd> sockets_;
  bool cut_ = false;
};

}  // namespace tenax::elastic::detail
