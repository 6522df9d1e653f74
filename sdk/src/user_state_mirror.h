// Every rank's registered user state (a simulation's fields, its time and step) as it stood at the
// last completed optimizer step, held by every rank, so that after a lost peer the whole job goes
// on from one consistent point without reading a checkpoint (issue 13, point 6).
//
// Why every rank holds every rank's state: a simulation rank's piece of the domain (per-rank state)
// exists only in that rank's memory; once it is dead, only a copy taken before can bring it back.
// The copy is taken where every rank is anyway, at each step() (the step API's unit of progress):
// one allgather of each rank's registered bytes before the step's backward, committed when the
// step's gradient sync has returned. A heal then puts every rank, survivors included, back to the
// committed copy: the survivors' solver state rolls back in memory to that step (their own bytes),
// the replacement gets its piece from the copy. So no rank needs a solver state that the job never
// had on every rank at once, and any number of simultaneous losses is healed while one rank lives.
// The cost is one allgather of (replicated + per-rank bytes) x world size per step (the first, and
// any step whose state outgrew the agreed slot, take two), and as much host memory on every rank:
// right for the state of the solvers that embed Tenax today (a few MB per rank); for a large world
// with large fields a copy at one buddy rank would scale, at the price of a point-to-point
// exchange the Communicator does not offer yet and of losing a rank together with its buddy.
// Thread-safety: training thread only; stage() and heal() are collective.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tenax/elastic/communicator.h"
#include "tenax/sdk/user_state.h"

namespace tenax::sdk::detail {

class UserStateMirror {
 public:
  /// `state` is borrowed and must outlive the mirror.
  explicit UserStateMirror(const UserState& state) : state_(state) {}

  /// Collective: every rank's registered state as it is now, kept aside until commit().
  void stage(elastic::Communicator& comm);
  /// What stage() took becomes the state a heal restores: that of optimizer step `step`.
  void commit(std::int64_t step);
  /// The optimizer step of the committed state; -1 when there is none (a replacement).
  std::int64_t step() const { return step_; }
  /// Bytes the last stage() moved from this rank (its own row).
  std::size_t row_bytes() const { return row_bytes_; }

  /// Collective over a healed generation at optimizer step `step`: the lowest rank whose committed
  /// state is that step's sends it; every rank restores its registered state from it in place and
  /// holds it as committed. Throws RendezvousError when no rank holds it or the world size changed.
  void heal(elastic::Communicator& comm, std::int64_t step);

 private:
  static constexpr std::uint64_t kOverflow = std::numeric_limits<std::uint64_t>::max();
  /// The slot size of the one-allgather stage: the longest row with some room, from `rows`.
  void set_capacity(const std::vector<std::string>& rows);

  const UserState& state_;
  std::vector<std::string> committed_;  ///< one row per rank
  std::vector<std::string> staged_;
  std::int64_t step_ = -1;
  std::size_t row_bytes_ = 0;
  std::size_t capacity_ = 0;  ///< 0 until the first stage (or heal) agreed on one
};

}  // namespace tenax::sdk::detail
