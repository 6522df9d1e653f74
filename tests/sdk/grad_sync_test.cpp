#include "tenax/sdk/grad_sync.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/thread_ranks.h"

namespace tenax::sdk {
namespace {

class SdkGradSyncTest : public ::testing::TestWithParam<int> {};

TEST_P(SdkGradSyncTest, AveragesGradientsAcrossRanksAndBroadcastsParameters) {
  const int world = GetParam();
  std::vector<std::vector<torch::Tensor>> grads_after(static_cast<size_t>(world));
  std::vector<torch::Tensor> w_after(static_cast<size_t>(world));
  testing::run_ranks(world, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    auto w = torch::full({3, 5}, static_cast<float>(r + 1)).set_requires_grad(true);
    auto b = torch::full({7}, static_cast<float>(10 * r)).set_requires_grad(true);
    auto unused = torch::zeros({2}).set_requires_grad(true);  // never gets a gradient
    // Tiny bucket cap: forces several buckets to exercise the ordering.
    GradSync sync(comm, {w, b, unused}, GradSyncOptions{32});
    EXPECT_GE(sync.bucket_count(), 2u);
    sync.broadcast_parameters(0);
    w.mutable_grad() = torch::full({3, 5}, static_cast<float>(r));
    b.mutable_grad() = torch::full({7}, static_cast<float>(2 * r));
    sync.synchronize();
    grads_after[static_cast<size_t>(r)] = {w.grad().clone(), b.grad().clone(), unused.grad().clone()};
    w_after[static_cast<size_t>(r)] = w.detach().clone();
  });
  const float mean_r = static_cast<float>(world - 1) / 2.0f;
  for (int r = 0; r < world; ++r) {
    auto& g = grads_after[static_cast<size_t>(r)];
    EXPECT_TRUE(torch::allclose(g[0], torch::full({3, 5}, mean_r)));
    EXPECT_TRUE(torch::allclose(g[1], torch::full({7}, 2 * mean_r)));
    EXPECT_TRUE(torch::equal(g[2], torch::zeros({2})));
    EXPECT_TRUE(torch::equal(w_after[static_cast<size_t>(r)], torch::full({3, 5}, 1.0f))) << "rank " << r;
  }
}

TEST_P(SdkGradSyncTest, LaterBackwardPassesAccumulateIntoTheBucketViews) {
  const int world = GetParam();
  std::vector<torch::Tensor> second(static_cast<size_t>(world));
  // Not std::vector<bool>: its elements share words, so ranks (threads) writing their own
  // element race with each other and lose updates.
  std::vector<char> same_storage(static_cast<size_t>(world), 0);
  testing::run_ranks(world, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    auto w = torch::ones({4, 3}).set_requires_grad(true);
    auto b = torch::ones({5}).set_requires_grad(true);
    GradSync sync(comm, {w, b}, GradSyncOptions{16});
    (w * static_cast<float>(r)).sum().backward();
    (b * 2.0f).sum().backward();
    sync.synchronize();
    const void* first_ptr = w.grad().data_ptr();
    // The next step: gradients zeroed in place, two backward passes accumulate (as with
    // gradient accumulation), then one synchronize.
    sync.zero_grad();
    (w * static_cast<float>(r + 1)).sum().backward();
    (w * 3.0f).sum().backward();
    (b * static_cast<float>(r)).sum().backward();
    sync.synchronize();
    same_storage[static_cast<size_t>(r)] = w.grad().data_ptr() == first_ptr ? 1 : 0;
    second[static_cast<size_t>(r)] = torch::cat({w.grad().reshape({-1}), b.grad()}).clone();
  });
  const float mean_r = static_cast<float>(world - 1) / 2.0f;
  const auto expected = torch::cat({torch::full({12}, mean_r + 1.0f + 3.0f), torch::full({5}, mean_r)});
  for (int r = 0; r < world; ++r) {
    EXPECT_TRUE(torch::allclose(second[static_cast<size_t>(r)], expected)) << "rank " << r;
    EXPECT_EQ(same_storage[static_cast<size_t>(r)], 1) << "rank " << r << ": the gradient was reallocated";
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SdkGradSyncTest, ::testing::Values(1, 2, 3, 4));

}  // namespace
}  // namespace tenax::sdk
