// The resumable data order of DESIGN.md decision 3: a pure function of
// (seed, epoch, global sample cursor). Rank r of W takes its slice of each global batch, so a
// resumed or resized job continues the very same global sequence. No torch::data samplers.
// By default the last incomplete global batch of an epoch is dropped (every step has the same
// global batch); with drop_last false it is the epoch's last, smaller step, padded to a multiple
// of the world size with the epoch's first samples (torch's DistributedSampler pads so), so that
// every rank has as many samples as the others. With lengths, each epoch's shuffled order is
// grouped by length as transformers' LengthGroupedSampler groups it (group_by_length).
// Thread-safety: immutable after construction but for a cache of the last epoch's order (every
// step's batch reads it; without it each step would shuffle, and with lengths sort, the whole
// dataset again), which a mutex guards: callable from any thread.
//
//   ResumableSampler sampler(dataset.size(), /*global_batch=*/32, /*seed=*/42);
//   auto idx = sampler.rank_indices(step, rank, world);   // this rank's samples for `step`
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace tenax::sdk {

/// Where the data stream stands: the position after `global_step` full global batches.
struct SamplerPosition {
  std::int64_t epoch = 0;
  std::int64_t cursor = 0;  ///< samples consumed in this epoch (a multiple of the global batch)
};

struct SamplerOptions {
  /// Drop the epoch's last incomplete global batch (else it is a last, smaller step).
  bool drop_last = true;
  /// Every sample's length (Dataset::length), to group samples of similar length; empty: not grouped.
  std::vector<std::int64_t> lengths;
};

/// transformers' get_length_grouped_indices on a given shuffled `order`: cut into mega-batches
/// of min(n / (4 batch), 50) (at least 1) batches, each sorted by `lengths` longest first (a
/// stable sort), and the longest sample of all moved to the very front (the first step meets
/// the largest batch, so an out-of-memory shows at once).
std::vector<std::int64_t> group_by_length(const std::vector<std::int64_t>& order,
                                          const std::vector<std::int64_t>& lengths, std::int64_t batch);

class ResumableSampler {
 public:
  /// Throws ConfigError when the dataset holds less than one global batch (with drop_last) or
  /// none, or when lengths does not give one per sample.
  ResumableSampler(std::int64_t dataset_size, std::int64_t global_batch, std::uint64_t seed,
                   SamplerOptions options = {});

  std::int64_t steps_per_epoch() const { return steps_per_epoch_; }
  std::int64_t global_batch() const { return global_batch_; }
  std::uint64_t seed() const { return seed_; }

  /// The permutation of [0, dataset_size) used in `epoch`.
  std::vector<std::int64_t> epoch_order(std::int64_t epoch) const;

  /// Epoch and cursor after `global_step` steps.
  SamplerPosition position_at(std::int64_t global_step) const;

  /// The global batch of `global_step`: global_batch indices (fewer at an epoch's end without drop_last).
  std::vector<std::int64_t> global_batch_indices(std::int64_t global_step) const;

  /// Rank `rank`'s contiguous slice of that global batch: global_batch / world indices, or at a
  /// short epoch end an equal share of it padded as the header says.
  std::vector<std::int64_t> rank_indices(std::int64_t global_step, int rank, int world) const;

 private:
  std::int64_t dataset_size_;
  std::int64_t global_batch_;
  std::uint64_t seed_;
  SamplerOptions options_;
  std::int64_t steps_per_epoch_;
  /// The order of the epoch last asked for. Shared by copies, whose orders are the same.
  struct EpochCache {
    std::mutex mutex;
    std::int64_t epoch = -1;
    std::vector<std::int64_t> order;
  };
  std::shared_ptr<EpochCache> cache_ = std::make_shared<EpochCache>();
  /// `fn(order)` on epoch `epoch`'s order, under the cache's lock.
  template <typename Fn>
  auto with_order(std::int64_t epoch, Fn&& fn) const;
  std::vector<std::int64_t> compute_order(std::int64_t epoch) const;
};

}  // namespace tenax::sdk
