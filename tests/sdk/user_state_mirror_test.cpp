// The mirror of registered user state (sdk/src/user_state_mirror.h) over real Gloo communicators
// in threads: what a heal restores is the committed step's state of every rank, never a staged
// one; a replacement gets its piece from a survivor; a blob that outgrows its slot still arrives.
#include "user_state_mirror.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "tenax/core/error.h"

namespace tenax::sdk::detail {
namespace {

// One rank's registered state: a per-rank field (its piece of the domain), a replicated time, and
// a per-rank blob whose length the test chooses.
struct RankState {
  torch::Tensor field = torch::zeros({64, 33}, torch::kFloat64);
  torch::Tensor time = torch::zeros({1}, torch::kFloat64);
  std::string blob;
  UserState registry;

  RankState() {
    registry.add_tensor("field", field, UserState::Scope::kPerRank);
    registry.add_tensor("time", time);
    registry.add_blob(
        "cursor", [this] { return blob; }, [this](const std::string& b) { blob = b; }, UserState::Scope::kPerRank);
  }
  // The state of rank `rank` at solver step `step`: different on every rank and every step.
  void set(int rank, int step, std::size_t blob_bytes) {
    field.copy_(torch::arange(64 * 33, torch::kFloat64).reshape({64, 33}) * (rank + 1) + step);
    time.fill_(0.5 * step);
    blob.assign(blob_bytes, static_cast<char>('a' + (rank + step) % 26));
  }
  void expect(int rank, int step, std::size_t blob_bytes) {
    RankState want;
    want.set(rank, step, blob_bytes);
    EXPECT_TRUE(torch::equal(field, want.field)) << "rank " << rank << " step " << step;
    EXPECT_TRUE(torch::equal(time, want.time)) << "rank " << rank << " step " << step;
    EXPECT_EQ(blob, want.blob) << "rank " << rank << " step " << step;
  }
};

TEST(SdkUserStateMirror, AHealRestoresEveryRanksCommittedStepAndAReplacementGetsItsPieceFromASurvivor) {
  constexpr int kWorld = 3;
  constexpr int kReplaced = 1;
  testing::run_ranks(kWorld, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    RankState state;
    UserStateMirror mirror(state.registry);
    // Steps 1..4 staged and committed (the first stage agrees on the slot, the later ones reuse it).
    for (int step = 1; step <= 4; ++step) {
      state.set(r, step, 100);
      mirror.stage(comm);
      mirror.commit(step);
    }
    EXPECT_EQ(mirror.step(), 4);
    // Step 5 staged but its gradient sync never returned: a heal must not go to it.
    state.set(r, 5, 100);
    mirror.stage(comm);
    state.set(r, 7, 100);  // the solver went on after the staged step
    // Rank 1 is replaced: a new process with its registrations and nothing held.
    RankState fresh;
    UserStateMirror replacement(fresh.registry);
    RankState& mine = r == kReplaced ? fresh : state;
    (r == kReplaced ? replacement : mirror).heal(comm, 4);
    mine.expect(r, 4, 100);
    // The healed generation stages and commits on, the replacement like every other rank.
    UserStateMirror& healed = r == kReplaced ? replacement : mirror;
    EXPECT_EQ(healed.step(), 4);
    mine.set(r, 8, 100);
    healed.stage(comm);
    healed.commit(5);
    mine.set(r, 9, 100);
    healed.heal(comm, 5);
    mine.expect(r, 8, 100);
  });
}

TEST(SdkUserStateMirror, ABlobThatOutgrowsItsSlotIsStillMirroredWhole) {
  constexpr int kWorld = 2;
  testing::run_ranks(kWorld, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    RankState state;
    UserStateMirror mirror(state.registry);
    state.set(r, 1, 10);
    mirror.stage(comm);
    mirror.commit(1);
    // Only rank 1's blob grows, far past any room the slot was given: every rank must fall back
    // together, or the allgather would hang or mix rows.
    const std::size_t grown = r == 1 ? 300'000 : 10;
    state.set(r, 2, grown);
    mirror.stage(comm);
    mirror.commit(2);
    EXPECT_GE(mirror.row_bytes(), grown);
    state.set(r, 3, grown);
    mirror.stage(comm);  // the new slot holds it: one allgather again
    mirror.commit(3);
    state.set(r, 4, 10);
    mirror.heal(comm, 3);
    state.expect(r, 3, grown);
  });
}

TEST(SdkUserStateMirror, AHealToAStepNoRankHoldsSaysTheJobMustRestartFromItsCheckpoint) {
  std::vector<std::string> messages(2);
  testing::run_ranks(2, [&](elastic::Communicator& comm) {
    RankState state;
    UserStateMirror mirror(state.registry);
    state.set(comm.rank(), 1, 10);
    mirror.stage(comm);
    mirror.commit(1);
    try {
      mirror.heal(comm, 2);
    } catch (const RendezvousError& e) {
      messages[static_cast<std::size_t>(comm.rank())] = e.what();
    }
  });
  for (const std::string& m : messages) {
    EXPECT_NE(m.find("no rank holds the registered user state of that step"), std::string::npos) << m;
    EXPECT_NE(m.find("restart from its newest checkpoint"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace tenax::sdk::detail
