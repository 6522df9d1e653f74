// In-process recovery at the C API's collective calls (tenax_enable_in_process_recovery).
//
// A simulation notices a lost peer in whichever collective it is in: tenax_train_step, a save, the
// preemption poll, or its own tenax_allgather (a halo exchange). Each of these runs its body under
// recovering(): a PeerLostError or TimeoutError is healed in process through the trainer that
// enabled it (Trainer::recover: rejoin, heal from a live peer, registered arrays put back to the
// last completed step) and becomes RecoveredError, which the boundary reports as TENAX_RECOVERED.
// tenax_train_step needs no wrapper: Trainer::step heals inside the call itself.
// Thread-safety: the solver's thread (tenax.h: one thread per context).
#pragma once

#include <string>
#include <utility>

#include "handles.h"
#include "tenax/core/error.h"

namespace tenax::capi {

/// Heals the job through `trainer` after a lost peer (`why`) and throws RecoveredError. Returns
/// without doing anything when `trainer` is null, did not enable in-process recovery, has not
/// begun, or its run does not heal in process: the caller then rethrows the peer's error.
void recover_through(tenax_trainer* trainer, const std::string& why);

/// Runs the collective `body`; a lost peer in it is healed through `trainer` when it can be.
template <class F>
void recovering(tenax_trainer* trainer, F&& body) {
  try {
    std::forward<F>(body)();
  } catch (const PeerLostError& e) {
    recover_through(trainer, e.what());
    throw;
  } catch (const TimeoutError& e) {
    recover_through(trainer, e.what());
    throw;
  }
}

}  // namespace tenax::capi
