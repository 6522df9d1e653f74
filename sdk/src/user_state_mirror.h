// Every rank's registered user state (a simulation's fields, its time and step) as it stood at the
// last completed optimizer step, held by every rank, so that after a lost peer the whole job goes
// on from one consistent point without reading a checkpoint (issue 13, point 6).
//
// Why every rank holds every rank's state: a simulation rank's piece of the domain (per-rank state)
// exists only in that rank's memory; once it is dead, only a copy taken before can bring it back.
// The copy is taken where every rank is anyway, at each step() (the step API's unit of progress):
// each rank's registered bytes as the step starts, gathered by every rank with the step's gradient
// allreduce, committed when the step completes. A heal then puts every rank, survivors included,
// back to the committed copy: the survivors' solver state rolls back in memory to that step (their
// own bytes), the replacement gets its piece from the copy. So no rank needs a solver state that
// the job never had on every rank at once, and any number of simultaneous losses is healed while
// one rank lives.
// The cost per step: one copy of this rank's bytes into its slot, and one allgather right after
// the gradient allreduce (the first step, and any step whose state outgrew the agreed slot, take
// two more). Riding in the allreduce (GradSync's mirror, as the random states do) was measured
// slower even for a 68 KB state: the float packing and the larger last bucket cost more than a
// collective of its own.
// The gathered table is committed by a swap, not a copy. Host memory: two tables of world x slot
// bytes on every rank (the committed one and the one being staged), which is right for the state
// of the solvers that embed Tenax today (a few MB per rank); for a large world with large fields a
// copy at one buddy rank would scale, at the price of a point-to-point exchange the Communicator
// does not offer yet and of losing a rank together with its buddy. bench/mirror_overhead.py
// measures the cost.
// Thread-safety: training thread only; stage(), exchange() and heal() are collective.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "tenax/elastic/communicator.h"
#include "tenax/sdk/user_state.h"

namespace tenax::sdk::detail {

class UserStateMirror {
 public:
  /// `state` is borrowed and must outlive the mirror.
  explicit UserStateMirror(const UserState& state) : state_(state) {}

  /// Collective: every rank's registered state as it is now, kept aside until commit():
  /// capture() then exchange().
  void stage(elastic::Communicator& comm);
  /// This rank's registered state as it is now, copied aside for the next exchange(). Not collective.
  void capture(int rank);
  /// Collective: every rank's capture(), kept aside until commit(). A step calls it right after its
  /// gradient allreduce, when the ranks arrive together: waiting for a late peer is then paid once,
  /// in the allreduce, not again here.
  void exchange(elastic::Communicator& comm);
  /// What stage() took becomes the state a heal restores: that of optimizer step `step`.
  void commit(std::int64_t step);
  /// The optimizer step of the committed state; -1 when there is none (a replacement).
  std::int64_t step() const { return step_; }
  /// Bytes the last stage() moved from this rank (its own row).
  std::size_t row_bytes() const { return row_bytes_; }
  /// Calls of exchange() and the wall time of every capture() and exchange(), collectives
  /// included: what the mirror costs the job (reported at the end of a run).
  std::int64_t stages() const { return stages_; }
  double stage_seconds() const { return stage_seconds_; }

  /// Collective over a healed generation at optimizer step `step`: the lowest rank whose committed
  /// state is that step's sends it; every rank restores its registered state from it in place and
  /// holds it as committed. Throws RendezvousError when no rank holds it or the world size changed.
  void heal(elastic::Communicator& comm, std::int64_t step);

 private:
  /// Every rank's row in rank order, each in a slot of `capacity` bytes: the row's length (u64),
  /// then its bytes. The allgather fills one in place; commit() swaps them, so that a step copies
  /// its state once into the send slot and never again (the cost is per solver step, issue 37).
  struct Table {
    std::size_t capacity = 0;
    int world = 0;
    std::vector<char> bytes;  ///< capacity * world; empty when it holds nothing
    std::string_view row(int rank) const;
    /// Whether every slot holds a whole row (none marked as having outgrown the capacity).
    bool complete() const;
    void clear() { bytes.clear(); }
  };
  static constexpr std::uint64_t kOverflow = std::numeric_limits<std::uint64_t>::max();

  /// Writes send_'s length: the row's, or kOverflow where it outgrew the agreed slot.
  void mark_slot();
  /// After the allgather into staged_ (complete() false: a row outgrew its slot): every row again,
  /// with two allgathers, and a capacity that holds them.
  void gather_rows(elastic::Communicator& comm);
  /// The slot size of the one-allgather stage: the longest row with some room, from `rows`.
  static std::size_t capacity_for(const std::vector<std::string>& rows);
  /// `rows` laid out in `table` with slots of `capacity` bytes.
  static void lay_out(const std::vector<std::string>& rows, std::size_t capacity, Table& table);

  const UserState& state_;
  Table committed_;
  Table staged_;
  std::vector<char> send_;  ///< this rank's slot, filled by capture(), reused by every step
  bool captured_ = false;   ///< capture() filled send_ and exchange() has not sent it yet
  std::int64_t step_ = -1;
  std::size_t row_bytes_ = 0;
  std::size_t capacity_ = 0;  ///< 0 until the first stage (or heal) agreed on one
  std::int64_t stages_ = 0;
  double stage_seconds_ = 0.0;
};

}  // namespace tenax::sdk::detail
