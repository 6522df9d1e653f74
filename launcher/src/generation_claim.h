// The numbering of a rendezvous host's generations, fenced: the function a RendezvousService
// calls before it sends any ASSIGN (RendezvousOptions::claim_generation). It numbers above the
// job's generation fence (generation_fence.h) and records the number there, so that the
// checkpoints of every older generation can no longer commit; and it refuses when this host no
// longer holds the rendezvous lease (rendezvous_lease.h): a host that lost its lease (paused,
// cut off) and has not noticed yet must not advance the fence past the current host's
// generation, which would fence the job itself off.
//
// It runs on the service's thread and does blocking I/O on the shared file system (a lock, an
// fsync), once per generation formed: heartbeats wait behind it for those milliseconds, which
// is far inside any heartbeat expiry.
//
// Thread-safety: the returned function copies what it needs; it may run on any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tenax/core/status.h"
#include "tenax/elastic/generation_fence.h"
#include "tenax/elastic/rendezvous_lease.h"

namespace tenax::launcher {

/// For the service of `holder`, which holds lease `term` in `lease`'s directory.
std::function<StatusOr<std::int64_t>(std::int64_t)> fenced_generation_claim(elastic::LeaseFile lease,
                                                                            elastic::GenerationFence fence,
                                                                            std::int64_t term, std::string holder);

/// The single-node agent's numbering: the first generation number >= `wanted` above the fence,
/// recorded in it. Throws Error naming the directory when the fence cannot be read or moved.
std::int64_t advance_fence_from(const elastic::GenerationFence& fence, std::int64_t wanted);

}  // namespace tenax::launcher
