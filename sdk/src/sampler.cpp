#include "tenax/sdk/sampler.h"

#include <numeric>
#include <string>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

// SplitMix64: a tiny, fully specified generator, so the order does not depend on the
// standard library's distributions (std::shuffle and uniform_int_distribution are
// implementation-defined).
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Unbiased integer in [0, bound) by rejection.
std::uint64_t uniform_below(std::uint64_t& state, std::uint64_t bound) {
  const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  std::uint64_t x;
  do {
    x = splitmix64(state);
  } while (x >= limit);
  return x % bound;
}

}  // namespace

ResumableSampler::ResumableSampler(std::int64_t dataset_size, std::int64_t global_batch, std::uint64_t seed)
    : dataset_size_(dataset_size), global_batch_(global_batch), seed_(seed) {
  if (global_batch <= 0) throw ConfigError("global batch size must be positive");
  if (dataset_size < global_batch) {
    throw ConfigError("the training set has " + std::to_string(dataset_size) +
                      " samples, fewer than one global batch (" + std::to_string(global_batch) +
                      " = world size x per_device_train_batch_size x gradient_accumulation_steps)");
  }
  steps_per_epoch_ = dataset_size / global_batch;
}

std::vector<std::int64_t> ResumableSampler::epoch_order(std::int64_t epoch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_size_));
  std::iota(order.begin(), order.end(), 0);
  std::uint64_t state = seed_ ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(epoch + 1));
  for (std::size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
    std::size_t j = static_cast<std::size_t>(uniform_below(state, i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

SamplerPosition ResumableSampler::position_at(std::int64_t global_step) const {
  return {global_step / steps_per_epoch_, (global_step % steps_per_epoch_) * global_batch_};
}

std::vector<std::int64_t> ResumableSampler::global_batch_indices(std::int64_t global_step) const {
  const SamplerPosition pos = position_at(global_step);
  const std::vector<std::int64_t> order = epoch_order(pos.epoch);
  return {order.begin() + pos.cursor, order.begin() + pos.cursor + global_batch_};
}

std::vector<std::int64_t> ResumableSampler::rank_indices(std::int64_t global_step, int rank, int world) const {
  if (world <= 0 || rank < 0 || rank >= world || global_batch_ % world != 0) {
    throw ConfigError("global batch " + std::to_string(global_batch_) + " cannot be split evenly over world size " +
                      std::to_string(world));
  }
  const std::vector<std::int64_t> batch = global_batch_indices(global_step);
  const std::int64_t per_rank = global_batch_ / world;
  return {batch.begin() + rank * per_rank, batch.begin() + (rank + 1) * per_rank};
}

}  // namespace tenax::sdk
