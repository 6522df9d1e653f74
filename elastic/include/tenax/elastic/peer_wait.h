// Whether this process is blocked on its peers right now, for the agent's hang detection
// (`tenax run --hang-timeout`, wait_beacon.h): a worker that makes no progress because it waits
// in a collective for a stopped peer is not the culprit of the hang, and the agent must be able
// to tell it from the one that stopped.
//
// A PeerWaitGuard lives for the length of a call that cannot return before other ranks act: each
// collective of the Gloo, NCCL and MPI communicators, a survivor's rejoin of the next generation,
// the wait for a checkpoint's commit. The state is the process's, not the thread's: GradSync
// allreduces on its own thread while the training thread waits for it. Guards nest and may
// overlap across threads; the wait counts from the first one in until the last one out.
//
// Cost: one compare-and-swap on entry and one on exit. This is process-wide state on purpose (a
// guard must be reachable from every backend without plumbing, and the beacon that reports it
// has no communicator to ask); it holds nothing distributed and is only ever read for reporting.
// Thread-safety: every function and the guard may be used from any thread.
//
//   { PeerWaitGuard waiting; gloo::allreduce(opts); }   // inside: peer_wait_state().waiting
#pragma once

#include <chrono>
#include <optional>

namespace tenax::elastic {

/// This process's peer waits as of the call.
struct PeerWaitState {
  bool waiting = false;                                 ///< a PeerWaitGuard is alive
  std::chrono::milliseconds waited{0};                  ///< since the current wait began (waiting)
  std::optional<std::chrono::milliseconds> since_wait;  ///< since the last one ended; none: none has
};

PeerWaitState peer_wait_state();

/// Marks the process as blocked on its peers while it lives.
class PeerWaitGuard {
 public:
  PeerWaitGuard();
  ~PeerWaitGuard();
  PeerWaitGuard(const PeerWaitGuard&) = delete;
  PeerWaitGuard& operator=(const PeerWaitGuard&) = delete;
};

}  // namespace tenax::elastic
