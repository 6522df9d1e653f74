// Healing from a peer (sdk/src/peer_heal.h): who sends, and the named-tensor broadcast, over
// real Gloo communicators in threads; the RNG mirror that rides in GradSync's allreduce.
#include "peer_heal.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/sdk/grad_sync.h"

namespace tenax::sdk::detail {
namespace {

TEST(SdkPeerHeal, TheLowestRankWithTheMostCompletedStepsSends) {
  EXPECT_EQ(plan_heal({{30}, {30}})->source, 0);
  // Rank 1's allreduce of step 31 completed, rank 0's failed: rank 1 is ahead and sends.
  const auto ahead = plan_heal({{30}, {31}, {31}});
  ASSERT_TRUE(ahead);
  EXPECT_EQ(ahead->source, 1);
  EXPECT_EQ(ahead->steps, 31);
  // A replacement (-1) never sends.
  const auto replaced = plan_heal({{-1}, {12}});
  ASSERT_TRUE(replaced);
  EXPECT_EQ(replaced->source, 1);
  EXPECT_EQ(replaced->steps, 12);
  // Step 0 is a state (nothing trained yet, but the initial replicas and RNG).
  EXPECT_EQ(plan_heal({{-1}, {0}})->source, 1);
  EXPECT_FALSE(plan_heal({{-1}, {-1}}));
  EXPECT_FALSE(plan_heal({}));
}

TEST(SdkPeerHeal, NamedTensorsReachEveryRankInPlaceOrAllocated) {
  constexpr int kWorld = 3;
  constexpr int kSource = 1;
  std::vector<NamedTensors> received(kWorld);
  std::vector<torch::Tensor> params(kWorld);
  testing::run_ranks(kWorld, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    const auto statuses = exchange_heal_status(comm, {r == 0 ? -1 : 40 + r});
    const auto plan = plan_heal(statuses);
    ASSERT_TRUE(plan);
    EXPECT_EQ(plan->source, 2);  // 42 steps
    torch::Tensor param = torch::full({2, 3}, static_cast<float>(r));
    params[static_cast<std::size_t>(r)] = param;
    NamedTensors outgoing;
    if (r == kSource) {
      outgoing = {{"model/w", param},
                  {"optim/w/step", torch::tensor({7}, torch::kInt64)},
                  {"empty", torch::empty({0}, torch::kFloat32)},
                  {"rng/mirrors", torch::arange(10, torch::kUInt8).reshape({2, 5})}};
    }
    received[static_cast<std::size_t>(r)] = broadcast_named_tensors(
        comm, kSource, outgoing, [&](const std::string& name, torch::ScalarType, c10::IntArrayRef) {
          return name == "model/w" ? param : torch::Tensor();
        });
  });
  EXPECT_TRUE(received[kSource].empty());
  for (int r : {0, 2}) {
    const NamedTensors& got = received[static_cast<std::size_t>(r)];
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0].first, "model/w");
    EXPECT_EQ(got[0].second.data_ptr(), params[static_cast<std::size_t>(r)].data_ptr()) << "filled in place";
    EXPECT_TRUE(torch::equal(params[static_cast<std::size_t>(r)], torch::full({2, 3}, 1.0f)));
    EXPECT_TRUE(torch::equal(got[1].second, torch::tensor({7}, torch::kInt64)));
    EXPECT_EQ(got[2].second.numel(), 0);
    EXPECT_TRUE(torch::equal(got[3].second, torch::arange(10, torch::kUInt8).reshape({2, 5})));
  }
}

TEST(SdkPeerHeal, ADestinationOfAnotherShapeIsRefusedNamingTheTensor) {
  std::string refused;
  testing::run_ranks(2, [&](elastic::Communicator& comm) {
    NamedTensors outgoing;
    if (comm.rank() == 0) outgoing = {{"model/w", torch::zeros({4})}};
    try {
      broadcast_named_tensors(
          comm, 0, outgoing, [](const std::string&, torch::ScalarType, c10::IntArrayRef) { return torch::zeros({5}); });
    } catch (const StorageError& e) {
      refused = e.what();  // the receiver
    } catch (const PeerLostError&) {
      // the sender, when the receiver gives up first
    }
  });
  EXPECT_NE(refused.find("'model/w'"), std::string::npos) << refused;
}

// The mirror rides in the last bucket: every rank gets every rank's bytes, exactly (all 256
// byte values, a length that is no multiple of 3), and the gradients are still the average.
TEST(SdkPeerHeal, GradSyncCarriesEveryRanksMirrorInTheGradientAllreduce) {
  constexpr int kWorld = 3;
  constexpr std::int64_t kBytes = 5056 + 1;  // torch 1.13's CPU generator state is 5056 bytes
  std::vector<torch::Tensor> tables(kWorld);
  std::vector<torch::Tensor> grads(kWorld);
  auto mirror_of = [](int r) {
    return (torch::arange(kBytes, torch::kInt64) * (r + 1) + r).remainder(256).to(torch::kUInt8);
  };
  testing::run_ranks(kWorld, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    auto w = torch::zeros({50}).set_requires_grad(true);
    auto b = torch::zeros({3}).set_requires_grad(true);
    GradSync sync(comm, {w, b}, GradSyncOptions{64});  // two buckets
    EXPECT_FALSE(sync.mirrors().defined());
    for (int step = 0; step < 2; ++step) {  // the second step reuses the grown bucket
      w.mutable_grad() = torch::full({50}, static_cast<float>(r + step));
      b.mutable_grad() = torch::full({3}, static_cast<float>(2 * r));
      sync.synchronize(mirror_of(r + step));
    }
    tables[static_cast<std::size_t>(r)] = sync.mirrors().clone();
    grads[static_cast<std::size_t>(r)] = w.grad().clone();
  });
  for (int r = 0; r < kWorld; ++r) {
    const torch::Tensor& table = tables[static_cast<std::size_t>(r)];
    ASSERT_EQ(table.sizes(), (std::vector<std::int64_t>{kWorld, kBytes}));
    for (int peer = 0; peer < kWorld; ++peer) {
      EXPECT_TRUE(torch::equal(table[peer], mirror_of(peer + 1))) << "rank " << r << " row " << peer;
    }
    EXPECT_TRUE(torch::equal(grads[static_cast<std::size_t>(r)], torch::full({50}, 2.0f)));
  }
}

TEST(SdkPeerHeal, GatheredMirrorsAreTheStartingTable) {
  std::vector<torch::Tensor> tables(2);
  testing::run_ranks(2, [&](elastic::Communicator& comm) {
    auto w = torch::zeros({4}).set_requires_grad(true);
    GradSync sync(comm, {w});
    sync.gather_mirrors(torch::full({6}, comm.rank() + 1, torch::kUInt8));
    tables[static_cast<std::size_t>(comm.rank())] = sync.mirrors();
  });
  for (const auto& t : tables) {
    EXPECT_TRUE(
        torch::equal(t, torch::stack({torch::full({6}, 1, torch::kUInt8), torch::full({6}, 2, torch::kUInt8)})));
  }
}

}  // namespace
}  // namespace tenax::sdk::detail
