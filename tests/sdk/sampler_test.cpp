#include "tenax/sdk/sampler.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

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

TEST(SdkSampler, RejectsBatchesThatDoNotFit) {
  EXPECT_THROW(ResumableSampler(5, 8, 0), ConfigError);
  ResumableSampler s(64, 8, 0);
  EXPECT_THROW(s.rank_indices(0, 0, 3), ConfigError);
}

}  // namespace
}  // namespace tenax::sdk
