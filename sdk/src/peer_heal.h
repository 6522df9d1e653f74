// Healing a new generation from a live peer's memory (DESIGN.md decision 13): which rank
// sends, and the collective that moves named tensors from it to every other rank.
//
// After a failure the ranks of the new generation may stand at two different steps: a rank
// whose gradient allreduce of step K completed applied it, one whose allreduce failed did not
// (a ring allreduce can complete on some ranks and not on others), and a replacement has no
// state at all. No rank can be ahead by two: completing step K needs every rank's gradient of
// step K. So the ranks that completed the most steps hold the newest state, and the lowest of
// them sends it: at most the one step in flight is lost.
// Thread-safety: pure functions and collectives on the training thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tenax/elastic/communicator.h"
#include "tenax/sdk/state_capture.h"

namespace tenax::sdk::detail {

/// What one rank brings to the healing of a new generation.
struct HealStatus {
  /// Optimizer steps this rank has completed; -1 for a replacement, which holds no state.
  std::int64_t completed_steps = -1;
};

struct HealPlan {
  int source = 0;          ///< the rank that sends its state
  std::int64_t steps = 0;  ///< the steps the healed job has completed
};

/// The lowest rank among those that completed the most steps; nullopt when no rank holds
/// state (every rank is a replacement: the job must restore from disk instead).
std::optional<HealPlan> plan_heal(const std::vector<HealStatus>& statuses);

/// Collective: every rank's status, in rank order.
std::vector<HealStatus> exchange_heal_status(elastic::Communicator& comm, const HealStatus& mine);

/// Where a receiver puts an incoming tensor: an existing tensor of that dtype and shape to fill
/// in place (a parameter), or an undefined tensor to have one allocated.
using HealDestination =
    std::function<torch::Tensor(const std::string& name, torch::ScalarType dtype, c10::IntArrayRef shape)>;

/// Collective: rank `source` sends `tensors` (ignored elsewhere); every other rank returns
/// them by name, in the source's order, filled in place where `destination` says. The source
/// returns an empty list. Throws StorageError when a destination has the wrong shape or dtype.
NamedTensors broadcast_named_tensors(elastic::Communicator& comm, int source, const NamedTensors& tensors,
                                     const HealDestination& destination);

}  // namespace tenax::sdk::detail
