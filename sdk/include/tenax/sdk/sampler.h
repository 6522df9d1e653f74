// The resumable data order of DESIGN.md decision 3: a pure function of
// (seed, epoch, global sample cursor). Rank r of W takes its slice of each global batch, so a
// resumed or resized job continues the very same global sequence. No torch::data samplers.
// The last incomplete global batch of an epoch is dropped (every step has the same global
// batch, which bit-exact resume and elastic resizing both need).
// Thread-safety: immutable after construction.
//
//   ResumableSampler sampler(dataset.size(), /*global_batch=*/32, /*seed=*/42);
//   auto idx = sampler.rank_indices(step, rank, world);   // this rank's samples for `step`
#pragma once

#include <cstdint>
#include <vector>

namespace tenax::sdk {

/// Where the data stream stands: the position after `global_step` full global batches.
struct SamplerPosition {
  std::int64_t epoch = 0;
  std::int64_t cursor = 0;  ///< samples consumed in this epoch (a multiple of the global batch)
};

class ResumableSampler {
 public:
  ResumableSampler(std::int64_t dataset_size, std::int64_t global_batch, std::uint64_t seed);

  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }
  std::int64_t global_batch() const { return global_batch_; }
  std::uint64_t seed() const { return seed_; }

  /// The permutation of [0, dataset_size) used in `epoch`.
  std::vector<std::int64_t> epoch_order(std::int64_t epoch) const;

  /// Epoch and cursor after `global_step` steps.
  SamplerPosition position_at(std::int64_t global_step) const;

  /// The global batch of `global_step` (global_batch indices).
  std::vector<std::int64_t> global_batch_indices(std::int64_t global_step) const;

  /// Rank `rank`'s contiguous slice of that global batch (global_batch / world indices).
  std::vector<std::int64_t> rank_indices(std::int64_t global_step, int rank, int world) const;

 private:
  std::int64_t dataset_size_;
  std::int64_t global_batch_;
  std::uint64_t seed_;
  std::int64_t steps_per_epoch_;
};

}  // namespace tenax::sdk
