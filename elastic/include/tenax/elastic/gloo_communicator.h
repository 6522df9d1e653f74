// The CPU Communicator, built on the Gloo library (DESIGN.md decision 1).
//
// `make_gloo_communicator` publishes this rank's TCP address in the store, waits for every
// peer's, connects a full mesh and ends with a barrier (so when it returns, every rank is
// connected), all within `options.timeout`. Collectives then run over
// Gloo's TCP transport: allreduce is Gloo's ring algorithm, so the same inputs on the same
// world size give bit-identical outputs on every rank and in every run.
// World size 1 needs no network: a local communicator is returned (the store is not touched).
//
// Failure: a Gloo I/O error becomes PeerLostError, a passed deadline TimeoutError (both name
// the rank); after either the communicator is unusable and every later call throws at once —
// build a new one for the next generation. abort() (or raising options.abort) cuts the mesh:
// a call in flight fails at once with PeerLostError, and peers blocked on this rank see its
// connections close (elastic/src/gloo_mesh.h says how, since Gloo cannot cancel a call).
// Thread-safety: one thread at a time per instance, except abort(), which any thread may call.
//
//   tenax::elastic::PrefixStore store(tenax::elastic::generation_prefix(gen), base);
//   auto comm = tenax::elastic::make_gloo_communicator(store, rank, world, {});
//   comm->allreduce(grads.data(), grads.size(), ElementType::kFloat32, ReduceOp::kSum);
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tenax/elastic/abort_signal.h"
#include "tenax/elastic/communicator.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {

struct GlooOptions {
  /// Address this rank's Gloo TCP device binds to and advertises to its peers.
  std::string hostname = "127.0.0.1";
  /// Deadline for connecting the mesh, and the default for operations that pass none.
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;
  /// When raised (from any thread), the connect and every call in flight or later fail with
  /// PeerLostError naming the signal's reason, instead of waiting out their timeouts.
  std::shared_ptr<AbortSignal> abort;
};

/// Collective over `size` ranks: connects a Gloo full mesh through `store` (borrowed only for
/// the duration of the call). Throws TimeoutError when peers do not arrive within
/// options.timeout, PeerLostError when a peer goes away during the connect, RendezvousError
/// when the TCP device cannot be created, ConfigError for a rank or size out of range.
std::unique_ptr<Communicator> make_gloo_communicator(Store& store, int rank, int size, const GlooOptions& options);

/// A communicator of world size 1 (every collective is a local copy or a no-op).
std::unique_ptr<Communicator> make_local_communicator();

/// Whether this build has the Gloo communicator (TENAX_WITH_GLOO; off in the build on PyPI's
/// torch, where make_gloo_communicator refuses a world above 1).
bool gloo_built();

}  // namespace tenax::elastic
