// The TCP Communicator: Tenax's own ring collectives over plain sockets (DESIGN.md decisions 1
// and 15), for CPU ranks where the Gloo library cannot be used — the build on PyPI's torch
// wheel, whose libtorch carries a Gloo of its own and ships no Gloo headers. The default build
// (Debian's libtorch and Gloo) keeps Gloo; TENAX_BACKEND=tcp picks this one there too.
//
// `make_tcp_communicator` connects a ring through `store` (each rank to the next; ranks publish
// "<host> <port> <token>" under "tcp/rank_<r>") and ends with a barrier, so when it returns every
// rank is connected, all within `options.timeout`. The collectives are ring algorithms:
//   allreduce  reduce-scatter then allgather over world-size segments, each rank sending and
//              receiving 2(n-1)/n of the buffer; a segment is reduced while it arrives. Every
//              element is reduced in an order fixed by the world size alone, once, and then
//              copied: the same inputs on the same world size give bit-identical results on every
//              rank and in every run (DESIGN.md decision 6).
//   broadcast  passed down the ring from the root, each rank forwarding bytes as they arrive;
//   allgather  n-1 ring steps, one rank's block each;   barrier  an allgather of one byte.
// Messages carry no tags: every rank calls the collectives in the same order and with the same
// sizes (the Communicator contract), and TCP keeps each connection's bytes in order.
//
// Failure: a neighbour closing its connection becomes PeerLostError, a passed deadline
// TimeoutError, each naming this rank and the neighbour it waited for; after either the
// communicator is unusable and every later call throws at once. abort() (or raising
// options.abort) shuts both connections down: a call in flight fails at once with
// PeerLostError, and the neighbours' calls fail as they would on a dead peer.
// Thread-safety: one thread at a time per instance, any thread (callable_from_any_thread), except
// abort(), which any thread may call at any time.
//
// Options (CommunicatorOptions, backend.h): the address this rank listens on and advertises, the
// deadline for connecting the ring (and the default for calls that pass none), the abort signal.
//
//   auto comm = tenax::elastic::make_tcp_communicator(store, rank, world, {hostname, timeout, abort});
//   comm->allreduce(grads.data(), grads.size(), ElementType::kFloat32, ReduceOp::kSum);
#pragma once

#include <memory>

#include "tenax/elastic/backend.h"
#include "tenax/elastic/communicator.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {

/// Collective over `size` ranks: connects the ring through `store` (borrowed only for the call).
/// World size 1 gives the local communicator (the store is not touched). Throws TimeoutError
/// when a neighbour does not arrive within options.timeout, PeerLostError when one goes away
/// during the connect (or the abort signal is raised), RendezvousError when this rank cannot
/// listen on options.hostname, ConfigError for a rank or size out of range or a timeout <= 0.
std::unique_ptr<Communicator> make_tcp_communicator(Store& store, int rank, int size,
                                                    const CommunicatorOptions& options);

}  // namespace tenax::elastic
