#include "tenax/sdk/sampler.h"

#include <algorithm>
#include <mutex>
#include <numeric>
#include <utility>
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

std::vector<std::int64_t> group_by_length(const std::vector<std::int64_t>& order,
                                          const std::vector<std::int64_t>& lengths, std::int64_t batch) {
  const auto n = static_cast<std::int64_t>(order.size());
  const std::int64_t mult = std::max<std::int64_t>(std::min<std::int64_t>(n / (batch * 4), 50), 1);
  const std::int64_t mega = mult * batch;
  std::vector<std::int64_t> out = order;
  const auto longer = [&](std::int64_t a, std::int64_t b) {
    return lengths[static_cast<std::size_t>(a)] > lengths[static_cast<std::size_t>(b)];
  };
  std::int64_t longest_start = 0;  // the mega-batch whose longest sample is the longest (the first such)
  for (std::int64_t start = 0; start < n; start += mega) {
    const auto first = out.begin() + start;
    std::stable_sort(first, out.begin() + std::min(n, start + mega), longer);
    if (longer(*first, out[static_cast<std::size_t>(longest_start)])) longest_start = start;
  }
  if (n > 0) std::swap(out[0], out[static_cast<std::size_t>(longest_start)]);
  return out;
}

ResumableSampler::ResumableSampler(std::int64_t dataset_size, std::int64_t global_batch, std::uint64_t seed,
                                   SamplerOptions options)
    : dataset_size_(dataset_size), global_batch_(global_batch), seed_(seed), options_(std::move(options)) {
  if (global_batch <= 0) throw ConfigError("global batch size must be positive");
  if (dataset_size < (options_.drop_last ? global_batch : 1)) {
    throw ConfigError("the training set has " + std::to_string(dataset_size) +
                      " samples, fewer than one global batch (" + std::to_string(global_batch) +
                      " = world size x per_device_train_batch_size x gradient_accumulation_steps)" +
                      (options_.drop_last ? "; with dataloader_drop_last = false a smaller one is trained on" : ""));
  }
  if (!options_.lengths.empty() && static_cast<std::int64_t>(options_.lengths.size()) != dataset_size) {
    throw ConfigError("group_by_length: " + std::to_string(options_.lengths.size()) + " lengths for " +
                      std::to_string(dataset_size) + " samples");
  }
  steps_per_epoch_ =
      options_.drop_last ? dataset_size / global_batch : (dataset_size + global_batch - 1) / global_batch;
}

template <typename Fn>
auto ResumableSampler::with_order(std::int64_t epoch, Fn&& fn) const {
  std::lock_guard<std::mutex> lock(cache_->mutex);
  if (cache_->epoch != epoch) {
    cache_->order = compute_order(epoch);
    cache_->epoch = epoch;
  }
  return fn(static_cast<const std::vector<std::int64_t>&>(cache_->order));
}

std::vector<std::int64_t> ResumableSampler::epoch_order(std::int64_t epoch) const {
  return with_order(epoch, [](const std::vector<std::int64_t>& order) { return order; });
}

std::vector<std::int64_t> ResumableSampler::compute_order(std::int64_t epoch) const {
  std::vector<std::int64_t> order(static_cast<std::size_t>(dataset_size_));
  std::iota(order.begin(), order.end(), 0);
  std::uint64_t state = seed_ ^ (0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(epoch + 1));
  for (std::size_t i = order.size(); i > 1; --i) {  // Fisher-Yates
    std::size_t j = static_cast<std::size_t>(uniform_below(state, i));
    std::swap(order[i - 1], order[j]);
  }
  if (!options_.lengths.empty()) return group_by_length(order, options_.lengths, global_batch_);
  return order;
}

SamplerPosition ResumableSampler::position_at(std::int64_t global_step) const {
  return {global_step / steps_per_epoch_, (global_step % steps_per_epoch_) * global_batch_};
}

std::vector<std::int64_t> ResumableSampler::global_batch_indices(std::int64_t global_step) const {
  const SamplerPosition pos = position_at(global_step);
  return with_order(pos.epoch, [&](const std::vector<std::int64_t>& order) {
    return std::vector<std::int64_t>(order.begin() + pos.cursor,
                                     order.begin() + std::min(pos.cursor + global_batch_, dataset_size_));
  });
}

std::vector<std::int64_t> ResumableSampler::rank_indices(std::int64_t global_step, int rank, int world) const {
  if (world <= 0 || rank < 0 || rank >= world || global_batch_ % world != 0) {
    throw ConfigError("global batch " + std::to_string(global_batch_) + " cannot be split evenly over world size " +
                      std::to_string(world));
  }
  const SamplerPosition pos = position_at(global_step);
  const std::int64_t size = std::min(global_batch_, dataset_size_ - pos.cursor);
  const std::int64_t per_rank = (size + world - 1) / world;  // global_batch / world unless short
  return with_order(pos.epoch, [&](const std::vector<std::int64_t>& order) {
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(per_rank));
    for (std::int64_t i = rank * per_rank; i < (rank + 1) * per_rank; ++i) {
      // Past the batch's end (a short last batch only): the epoch's first samples, cyclically.
      out.push_back(order[static_cast<std::size_t>(i < size ? pos.cursor + i : (i - size) % dataset_size_)]);
    }
    return out;
  });
}

}  // namespace tenax::sdk
