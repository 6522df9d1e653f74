#include "tenax/storage/write_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tenax/core/error.h"

namespace tenax::storage {
namespace {

std::vector<std::uint64_t> loads(const std::vector<std::size_t>& sizes, const std::vector<int>& owner, int world) {
  std::vector<std::uint64_t> load(static_cast<std::size_t>(world), 0);
  for (std::size_t i = 0; i < sizes.size(); ++i) load[static_cast<std::size_t>(owner[i])] += sizes[i];
  return load;
}

TEST(StoragePlan, FollowsTheGreedyRuleExactly) {
  // Descending: 10(i0)→r0, 7(i1)→r1, 5(i2)→r1 (7<10), 5(i3)→r0 (10<12), 3(i4)→r1 (12<15).
  EXPECT_EQ(plan_writes({10, 7, 5, 5, 3}, 2), (std::vector<int>{0, 1, 1, 0, 1}));
}

TEST(StoragePlan, TiesGoToLowerIndexThenLowerRank) {
  EXPECT_EQ(plan_writes({4, 4, 4, 4, 4}, 2), (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(plan_writes({1, 9, 1}, 3), (std::vector<int>{1, 0, 2}));
}

TEST(StoragePlan, BalancesBytesWithinTheLargestTensor) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::size_t> size(0, 1 << 20);
  for (int world : {1, 2, 3, 4, 8, 13}) {
    std::vector<std::size_t> sizes(200);
    for (auto& s : sizes) s = size(rng);
    const std::vector<int> owner = plan_writes(sizes, world);
    ASSERT_EQ(owner.size(), sizes.size());
    for (int r : owner) ASSERT_TRUE(r >= 0 && r < world);
    const auto load = loads(sizes, owner, world);
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    // Greedy assignment in descending order never lets the spread exceed the largest item.
    EXPECT_LE(*hi - *lo, *std::max_element(sizes.begin(), sizes.end())) << "world " << world;
  }
}

TEST(StoragePlan, IsDeterministic) {
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 500; ++i) sizes.push_back((i * 7919) % 1000);
  EXPECT_EQ(plan_writes(sizes, 6), plan_writes(sizes, 6));
}

TEST(StoragePlan, HandlesEdgeWorlds) {
  EXPECT_EQ(plan_writes({3, 2, 1}, 1), (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(plan_writes({3, 2}, 4), (std::vector<int>{0, 1}));
  EXPECT_TRUE(plan_writes({}, 3).empty());
  EXPECT_THROW(plan_writes({1}, 0), StorageError);
}

}  // namespace
}  // namespace tenax::storage
