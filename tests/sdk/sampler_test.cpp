#include "tenax/sdk/sampler.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

TEST(SdkSampler, EachEpochIsAPermutationAndEpochsDiffer) {
  ResumableSampler s(100, 10, 7);
  auto e0 = s.epoch_order(0), e1 = s.epoch_order(1);
  std::vector<std::int64_t> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[static_cast<size_t>(i)], i);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(s.epoch_order(0), e0) << "the cached epoch 1 made way for epoch 0 again";
  EXPECT_EQ(e0, ResumableSampler(100, 10, 7).epoch_order(0)) << "order must be a pure function";
  EXPECT_NE(e0, ResumableSampler(100, 10, 8).epoch_order(0)) << "the seed must matter";
}

TEST(SdkSampler, RanksTakeDisjointSlicesCoveringTheGlobalBatch) {
  ResumableSampler s(103, 12, 1);
  EXPECT_EQ(s.steps_per_epoch(), 8);  // the incomplete last batch is dropped
  for (std::int64_t step : {0, 5, 8, 17}) {
    for (int world : {1, 2, 3, 4, 6}) {
      std::vector<std::int64_t> joined;
      for (int r = 0; r < world; ++r) {
        auto part = s.rank_indices(step, r, world);
        EXPECT_EQ(static_cast<int>(part.size()), 12 / world);
        joined.insert(joined.end(), part.begin(), part.end());
      }
      EXPECT_EQ(joined, s.global_batch_indices(step)) << "step " << step << " world " << world;
    }
  }
}

TEST(SdkSampler, EverySampleOncePerEpochWhateverTheWorldSize) {
  ResumableSampler s(96, 8, 3);
  std::set<std::int64_t> seen;
  for (std::int64_t step = 0; step < s.steps_per_epoch(); ++step) {
    const int world = step < 5 ? 4 : 2;  // a resize in the middle of the epoch
    for (int r = 0; r < world; ++r) {
      for (auto i : s.rank_indices(step, r, world)) EXPECT_TRUE(seen.insert(i).second) << "repeated " << i;
    }
  }
  EXPECT_EQ(seen.size(), 96u);
  EXPECT_EQ(s.position_at(12).epoch, 1);
  EXPECT_EQ(s.position_at(13).cursor, 8);
}

// dataloader_drop_last = false: 103 samples in global batches of 12 are 8 full steps and a 9th
// of 7; each rank gets an equal share of those 7, the missing ones the epoch's first samples
// (torch's DistributedSampler pads so), and the next epoch starts at step 9.
TEST(SdkSampler, KeptLastBatchIsAShortStepSharedEquallyAndPaddedFromTheEpochsStart) {
  SamplerOptions keep;
  keep.drop_last = false;
  ResumableSampler s(103, 12, 1, keep);
  EXPECT_EQ(s.steps_per_epoch(), 9);
  EXPECT_EQ(s.global_batch_indices(8).size(), 7u);
  EXPECT_EQ(s.global_batch_indices(9).size(), 12u) << "epoch 1 starts with a full batch";
  EXPECT_EQ(s.position_at(9).epoch, 1);
  const std::vector<std::int64_t> order = s.epoch_order(0);
  for (int world : {1, 2, 3, 4, 6}) {
    std::vector<std::int64_t> joined;
    for (int r = 0; r < world; ++r) {
      auto part = s.rank_indices(8, r, world);
      EXPECT_EQ(static_cast<int>(part.size()), (7 + world - 1) / world) << "world " << world;
      joined.insert(joined.end(), part.begin(), part.end());
    }
    std::vector<std::int64_t> expected(order.begin() + 96, order.end());
    for (std::size_t i = 0; expected.size() < joined.size(); ++i) expected.push_back(order[i]);
    EXPECT_EQ(joined, expected) << "world " << world;
  }
  std::set<std::int64_t> seen;  // every sample once per epoch (world 1: no padding)
  for (std::int64_t step = 0; step < s.steps_per_epoch(); ++step) {
    for (auto i : s.rank_indices(step, 0, 1)) EXPECT_TRUE(seen.insert(i).second) << "repeated " << i;
  }
  EXPECT_EQ(seen.size(), 103u);
  // A dataset smaller than one global batch is one short step per epoch, padded cyclically.
  ResumableSampler tiny(2, 8, 5, keep);
  EXPECT_EQ(tiny.steps_per_epoch(), 1);
  EXPECT_EQ(tiny.rank_indices(0, 3, 4).size(), 1u);
  const auto first = tiny.epoch_order(0);
  EXPECT_EQ(tiny.rank_indices(0, 2, 4), (std::vector<std::int64_t>{first[0]}));
  EXPECT_EQ(tiny.rank_indices(0, 3, 4), (std::vector<std::int64_t>{first[1]}));
}

// group_by_length against transformers' get_length_grouped_indices, started from the same
// shuffled order (tests/sdk/goldens/length_grouped_goldens.json, by
// tools/goldens/length_grouped_goldens.py).
TEST(SdkSampler, GroupByLengthEqualsTransformersOnTheSameShuffle) {
  std::ifstream in(std::string(TENAX_SDK_GOLDENS_DIR) + "/length_grouped_goldens.json");
  ASSERT_TRUE(in) << "length_grouped_goldens.json";
  const nlohmann::json goldens = nlohmann::json::parse(in);
  ASSERT_EQ(goldens.at("cases").size(), 4u);
  for (const auto& c : goldens.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    EXPECT_EQ(group_by_length(c.at("order").get<std::vector<std::int64_t>>(),
                              c.at("lengths").get<std::vector<std::int64_t>>(), c.at("batch").get<std::int64_t>()),
              c.at("grouped").get<std::vector<std::int64_t>>());
  }
}

// The sampler's length-grouped order: still a permutation and a pure function of (seed,
// epoch), the longest sample first, each global batch's lengths close (sorted within a
// mega-batch), and without lengths the order is the plain shuffle.
TEST(SdkSampler, LengthGroupedOrderIsAPermutationWithTheLongestFirst) {
  std::vector<std::int64_t> lengths;
  for (std::int64_t i = 0; i < 400; ++i) lengths.push_back(1 + (i * 37) % 101);
  SamplerOptions grouped;
  grouped.lengths = lengths;
  ResumableSampler s(400, 8, 11, grouped);
  const auto order = s.epoch_order(2);
  std::vector<std::int64_t> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (std::int64_t i = 0; i < 400; ++i) EXPECT_EQ(sorted[static_cast<std::size_t>(i)], i);
  EXPECT_EQ(order, ResumableSampler(400, 8, 11, grouped).epoch_order(2));
  EXPECT_EQ(lengths[static_cast<std::size_t>(order[0])], 101);
  const auto plain = ResumableSampler(400, 8, 11).epoch_order(2);
  EXPECT_EQ(group_by_length(plain, lengths, 8), order);
  // Mega-batches of min(400 / 32, 50) = 12 batches: lengths never rise inside one, but for the
  // first two places of each (the longest's swap with the first mega-batch's head).
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (i % 96 == 0 || i % 96 == 1) continue;
    EXPECT_GE(lengths[static_cast<std::size_t>(order[i - 1])], lengths[static_cast<std::size_t>(order[i])]) << i;
  }
  SamplerOptions wrong;
  wrong.lengths = {1, 2, 3};
  EXPECT_THROW(ResumableSampler(400, 8, 11, wrong), ConfigError);
}

TEST(SdkSampler, RejectsBatchesThatDoNotFit) {
  EXPECT_THROW(ResumableSampler(5, 8, 0), ConfigError);
  SamplerOptions keep;
  keep.drop_last = false;
  EXPECT_NO_THROW(ResumableSampler(5, 8, 0, keep)) << "a smaller batch is trained on";
  EXPECT_THROW(ResumableSampler(0, 8, 0, keep), ConfigError);
  ResumableSampler s(64, 8, 0);
  EXPECT_THROW(s.rank_indices(0, 0, 3), ConfigError);
}

}  // namespace
}  // namespace tenax::sdk
