#include "tenax/storage/write_plan.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <queue>
#include <utility>

#include "tenax/core/error.h"

namespace tenax::storage {

std::vector<int> plan_writes(const std::vector<std::size_t>& nbytes, int world_size) {
  if (world_size < 1) {
    throw StorageError("plan_writes: world_size must be >= 1, got " + std::to_string(world_size));
  }
  std::vector<std::size_t> order(nbytes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // stable_sort keeps equal sizes in index order: the tie rule every rank must agree on.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return nbytes[a] > nbytes[b]; });

  // Min-heap on (load, rank): the least-loaded rank, lower rank on ties.
  using Slot = std::pair<std::uint64_t, int>;
  std::priority_queue<Slot, std::vector<Slot>, std::greater<Slot>> ranks;
  for (int r = 0; r < world_size; ++r) ranks.emplace(0, r);

  std::vector<int> owner(nbytes.size(), 0);
  for (std::size_t i : order) {
    Slot slot = ranks.top();
    ranks.pop();
    owner[i] = slot.second;
    slot.first += nbytes[i];
    ranks.push(slot);
  }
  return owner;
}

}  // namespace tenax::storage
