// Which rank writes which tensor. Under DDP every rank holds the full replicated state, so a
// checkpoint write is split by bytes: each rank writes about 1/N of the total (DESIGN.md 5).
// Thread-safety: a pure function.
//
//   std::vector<int> owner = tenax::storage::plan_writes(sizes, world_size);
//   // rank r writes every tensor i with owner[i] == r
#pragma once

#include <cstddef>
#include <vector>

namespace tenax::storage {

/// Greedy byte-balanced assignment: tensors in descending size (ties: lower index first) each
/// go to the least-loaded rank (ties: lower rank). Deterministic, so every rank computes the
/// same plan without talking. Returns owner rank per tensor, in input order. Throws
/// StorageError when world_size < 1.
std::vector<int> plan_writes(const std::vector<std::size_t>& nbytes, int world_size);

}  // namespace tenax::storage
