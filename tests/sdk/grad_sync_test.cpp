#include "tenax/sdk/grad_sync.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "tenax/core/error.h"

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
  std::vector<char> cleared_to_none(static_cast<size_t>(world), 0);
  testing::run_ranks(world, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    auto w = torch::ones({4, 3}).set_requires_grad(true);
    auto b = torch::ones({5}).set_requires_grad(true);
    GradSync sync(comm, {w, b}, GradSyncOptions{16});
    (w * static_cast<float>(r)).sum().backward();
    (b * 2.0f).sum().backward();
    sync.synchronize();
    const void* first_ptr = w.grad().data_ptr();
    // The next step: gradients cleared (zeroed in place with peers, set to none alone), two
    // backward passes accumulate (as with gradient accumulation), then one synchronize.
    sync.zero_grad();
    cleared_to_none[static_cast<size_t>(r)] = w.grad().defined() ? 0 : 1;
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
    if (world == 1) {
      // Alone there are no buckets to keep: autograd writes the first gradient, adds nothing to zeros.
      EXPECT_EQ(cleared_to_none[0], 1) << "zero_grad() left a gradient to add to";
    } else {
      EXPECT_EQ(cleared_to_none[static_cast<size_t>(r)], 0) << "rank " << r << ": a bucket view was dropped";
      EXPECT_EQ(same_storage[static_cast<size_t>(r)], 1) << "rank " << r << ": the gradient was reallocated";
    }
  }
}

// The preemption flag rides in the last bucket: every rank gets the largest one, the gradients
// are the same as without it, and a mirror beside it comes through intact.
TEST_P(SdkGradSyncTest, TheLargestFlagOfAnyRankComesBackToEveryRankWithTheGradients) {
  const int world = GetParam();
  std::vector<std::vector<int>> agreed(static_cast<size_t>(world));
  std::vector<torch::Tensor> grads(static_cast<size_t>(world));
  std::vector<torch::Tensor> mirrors(static_cast<size_t>(world));
  testing::run_ranks(world, [&](elastic::Communicator& comm) {
    const int r = comm.rank();
    auto w = torch::ones({4, 3}).set_requires_grad(true);
    auto b = torch::ones({5}).set_requires_grad(true);
    GradSync sync(comm, {w, b}, GradSyncOptions{16});
    auto& mine = agreed[static_cast<size_t>(r)];
    for (int round = 0; round < 5; ++round) {
      sync.zero_grad();
      (w * static_cast<float>(r + round)).sum().backward();
      (b * 2.0f).sum().backward();
      // Round 0: nobody; 1: the last rank (signal 10); 2: rank 0 says 15, the last rank 10;
      // 3: the largest value allowed, with a mirror beside it; 4: rank 0 a signal (10) in the low
      // field, the last rank a regroup request (1) in the next: each field is reduced on its own.
      int flag = 0;
      if (round == 1 && r == world - 1) flag = 10;
      if (round == 2) flag = r == 0 ? 15 : (r == world - 1 ? 10 : 0);
      if (round == 3 && r == world - 1) flag = GradSync::kMaxFlag;
      if (round == 4) flag = (r == 0 ? 10 : 0) | (r == world - 1 ? 1 << 8 : 0);
      const torch::Tensor mirror =
          round >= 3 ? torch::full({7}, static_cast<std::uint8_t>(40 + r), torch::kUInt8) : torch::Tensor();
      mine.push_back(sync.synchronize(mirror, flag));
    }
    grads[static_cast<size_t>(r)] = torch::cat({w.grad().reshape({-1}), b.grad()}).clone();
    mirrors[static_cast<size_t>(r)] = sync.mirrors().clone();
    EXPECT_THROW(sync.synchronize({}, -1), ConfigError);
    EXPECT_THROW(sync.synchronize({}, GradSync::kMaxFlag + 1), ConfigError);
  });
  const float mean_r = static_cast<float>(world - 1) / 2.0f;
  const torch::Tensor expected = torch::cat({torch::full({12}, mean_r + 4.0f), torch::full({5}, 2.0f)});
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(agreed[static_cast<size_t>(r)], (std::vector<int>{0, 10, 15, GradSync::kMaxFlag, (1 << 8) | 10}))
        << "rank " << r;
    EXPECT_TRUE(torch::allclose(grads[static_cast<size_t>(r)], expected)) << "rank " << r;
    ASSERT_EQ(mirrors[static_cast<size_t>(r)].sizes(), (std::vector<std::int64_t>{world, 7}));
    for (int q = 0; q < world; ++q) {
      EXPECT_TRUE(torch::equal(mirrors[static_cast<size_t>(r)][q],
                               torch::full({7}, static_cast<std::uint8_t>(40 + q), torch::kUInt8)))
          << "rank " << r << " row " << q;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SdkGradSyncTest, ::testing::Values(1, 2, 3, 4));

// A small MLP whose parameters fill several tiny buckets. Ranks are threads sharing torch's
// global generator, so every random number comes from the MLP's own: the same weights on every
// rank, and `seed` gives each rank its own data.
struct Mlp {
  explicit Mlp(std::uint64_t seed) : data(at::detail::createCPUGenerator(seed)) {
    at::Generator weights = at::detail::createCPUGenerator(7);
    torch::NoGradGuard no_grad;
    for (std::int64_t width : {6, 5, 4}) {
      layers.push_back(torch::nn::Linear(width, width - 1));
      for (auto& p : layers.back()->parameters()) p.copy_(torch::randn(p.sizes(), weights));
    }
    unused = torch::zeros({3}).set_requires_grad(true);  // never gets a gradient
  }
  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> params;
    for (const auto& layer : layers) {
      for (const auto& p : layer->parameters()) params.push_back(p);
    }
    params.push_back(unused);
    return params;
  }
  torch::Tensor batch(std::int64_t rows) { return torch::randn({rows, 6}, data); }
  torch::Tensor loss(const torch::Tensor& x) {
    torch::Tensor h = x;
    for (auto& layer : layers) h = torch::tanh(layer->forward(h));
    return h.pow(2).sum();
  }
  at::Generator data;
  std::vector<torch::nn::Linear> layers;
  torch::Tensor unused;
};

// Three optimizer steps of two micro-batches each; the gradients after every synchronize().
std::vector<torch::Tensor> train_three_steps(elastic::Communicator& comm, bool overlap, bool* overlapped) {
  Mlp mlp(static_cast<std::uint64_t>(100 + comm.rank()));
  GradSync sync(comm, mlp.parameters(), GradSyncOptions{48, overlap});
  *overlapped = sync.overlaps_backward();
  EXPECT_GE(sync.bucket_count(), 3u);
  std::vector<torch::Tensor> grads;
  for (int step = 0; step < 3; ++step) {
    sync.zero_grad();
    mlp.loss(mlp.batch(2)).backward();
    sync.prepare_for_backward();  // only the last micro-batch's backward launches buckets
    mlp.loss(mlp.batch(3)).backward();
    sync.synchronize();
    for (const auto& p : mlp.parameters()) grads.push_back(p.grad().clone());
    torch::NoGradGuard no_grad;
    for (auto& p : mlp.parameters()) p.sub_(0.1 * p.grad());
  }
  return grads;
}

class SdkGradSyncOverlapTest : public ::testing::TestWithParam<int> {};

TEST_P(SdkGradSyncOverlapTest, AllreducingDuringBackwardGivesTheSameBitsAsAfterIt) {
  const int world = GetParam();
  std::vector<std::vector<torch::Tensor>> overlapped(static_cast<size_t>(world));
  std::vector<std::vector<torch::Tensor>> after(static_cast<size_t>(world));
  std::vector<char> threaded(static_cast<size_t>(world), 0);
  testing::run_ranks(world, [&](elastic::Communicator& comm) {
    const auto r = static_cast<size_t>(comm.rank());
    bool used_thread = false;
    bool unused_thread = true;
    overlapped[r] = train_three_steps(comm, true, &used_thread);
    after[r] = train_three_steps(comm, false, &unused_thread);
    threaded[r] = used_thread && !unused_thread ? 1 : 0;
  });
  for (int r = 0; r < world; ++r) {
    const auto& a = overlapped[static_cast<size_t>(r)];
    const auto& b = after[static_cast<size_t>(r)];
    EXPECT_EQ(threaded[static_cast<size_t>(r)], 1) << "rank " << r;
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_TRUE(torch::equal(a[i], b[i])) << "rank " << r << ", gradient " << i;
      EXPECT_TRUE(torch::equal(a[i], overlapped[0][i])) << "rank " << r << " differs from rank 0, gradient " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, SdkGradSyncOverlapTest, ::testing::Values(2, 3, 4));

// Opens once any rank's first gradient bucket enters its allreduce.
struct Latch {
  void open() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      opened = true;
    }
    changed.notify_all();
  }
  bool wait_for(std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(mutex);
    return changed.wait_for(lock, limit, [&] { return opened; });
  }
  std::mutex mutex;
  std::condition_variable changed;
  bool opened = false;
};

// Passes everything to the rank's real communicator, opening `latch` at the first allreduce.
struct AllreduceWatch final : elastic::Communicator {
  AllreduceWatch(elastic::Communicator& inner, Latch& latch) : inner_(inner), latch_(latch) {}
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void allreduce(void* data, std::size_t count, elastic::ElementType type, elastic::ReduceOp op,
                 std::chrono::milliseconds timeout) override {
    latch_.open();
    inner_.allreduce(data, count, type, op, timeout);
  }
  void broadcast(void* data, std::size_t bytes, int root, std::chrono::milliseconds timeout) override {
    inner_.broadcast(data, bytes, root, timeout);
  }
  void allgather(const void* in, void* out, std::size_t bytes, std::chrono::milliseconds timeout) override {
    inner_.allgather(in, out, bytes, timeout);
  }
  void barrier(std::chrono::milliseconds timeout) override { inner_.barrier(timeout); }
  void abort() override { inner_.abort(); }

 private:
  elastic::Communicator& inner_;
  Latch& latch_;
};

// Identity forward; its backward — reached only after the layers above it finished their
// gradients — waits until a bucket's allreduce has begun, and records whether it did.
struct WaitForAllreduce : torch::autograd::Function<WaitForAllreduce> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x, std::int64_t latch) {
    ctx->saved_data["latch"] = latch;
    return x.clone();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* latch = reinterpret_cast<Latch*>(ctx->saved_data["latch"].toInt());
    // Bounded: without the overlap no allreduce begins before backward ends, and the test fails
    // after this long instead of hanging.
    if (!latch->wait_for(std::chrono::seconds(60))) throw std::runtime_error("no allreduce began during backward");
    return {grads[0], torch::Tensor()};
  }
};

TEST(SdkGradSyncOverlap, ABucketIsAllreducedWhileBackwardIsStillRunning) {
  // libtorch creates its default generator on first use; the rank threads then only share it.
  torch::nn::Linear warm_up(1, 1);
  testing::run_ranks(2, [&](elastic::Communicator& comm) {
    Latch latch;
    AllreduceWatch watched(comm, latch);
    torch::nn::Linear first(8, 8);
    torch::nn::Linear second(8, 8);
    std::vector<torch::Tensor> params = first->parameters();
    for (const auto& p : second->parameters()) params.push_back(p);
    // 8x8 + 8 floats per layer: a 300-byte cap puts each layer in its own bucket, `second`'s
    // (registered last) first.
    GradSync sync(watched, params, GradSyncOptions{300});
    ASSERT_EQ(sync.bucket_count(), 2u);
    ASSERT_TRUE(sync.overlaps_backward());
    sync.prepare_for_backward();
    torch::Tensor h = first->forward(torch::randn({4, 8}));
    h = WaitForAllreduce::apply(h, reinterpret_cast<std::int64_t>(&latch));
    second->forward(h).sum().backward();  // throws if `second`'s bucket was not launched
    sync.synchronize();
    EXPECT_TRUE(first->weight.grad().defined());
  });
}

// Size 2 without a peer: allreduce fails as a lost peer does, or succeeds as if the peer had the
// same gradients. Records the thread of every allreduce.
struct ScriptedPeer final : elastic::Communicator {
  int rank() const override { return 0; }
  int size() const override { return 2; }
  void allreduce(void* data, std::size_t count, elastic::ElementType, elastic::ReduceOp,
                 std::chrono::milliseconds) override {
    threads.push_back(std::this_thread::get_id());
    if (fail_at_call >= 0 && static_cast<int>(threads.size()) - 1 == fail_at_call) {
      throw PeerLostError("rank 1 closed the connection during allreduce (scripted)");
    }
    auto* values = static_cast<float*>(data);
    for (std::size_t i = 0; i < count; ++i) values[i] *= 2.0f;
  }
  void broadcast(void*, std::size_t, int, std::chrono::milliseconds) override {}
  void allgather(const void*, void*, std::size_t, std::chrono::milliseconds) override {}
  void barrier(std::chrono::milliseconds) override {}
  void abort() override {}
  bool callable_from_any_thread() const override { return any_thread; }

  int fail_at_call = -1;
  bool any_thread = true;
  std::vector<std::thread::id> threads;
};

TEST(SdkGradSyncOverlap, APeerLostInAnOverlappedBucketFailsSynchronizeAndTheNextRoundWorks) {
  ScriptedPeer peer;
  peer.fail_at_call = 0;  // the first bucket, launched during backward
  Mlp mlp(1);
  GradSync sync(peer, mlp.parameters(), GradSyncOptions{48});
  ASSERT_GE(sync.bucket_count(), 3u);
  sync.prepare_for_backward();
  mlp.loss(mlp.batch(2)).backward();
  EXPECT_THROW(sync.synchronize(), PeerLostError);
  // Every later bucket was skipped: the communicator is gone after a loss.
  EXPECT_EQ(peer.threads.size(), 1u);

  // A round left open by a failed backward, then a good one: the average of two equal ranks.
  peer.fail_at_call = -1;
  sync.prepare_for_backward();
  sync.zero_grad();
  sync.prepare_for_backward();
  torch::Tensor x = mlp.batch(2);
  mlp.loss(x).backward();
  sync.synchronize();
  std::vector<torch::Tensor> averaged;
  for (const auto& p : mlp.parameters()) averaged.push_back(p.grad().clone());
  for (auto& p : mlp.parameters()) p.mutable_grad() = torch::Tensor();
  mlp.loss(x).backward();
  const auto params = mlp.parameters();
  for (size_t i = 0; i + 1 < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(averaged[i], params[i].grad())) << "gradient " << i;
  }
  EXPECT_TRUE(torch::equal(averaged.back(), torch::zeros({3})));
}

TEST(SdkGradSyncOverlap, ACommunicatorBoundToItsThreadIsCalledOnlyFromTheTrainingThread) {
  ScriptedPeer peer;
  peer.any_thread = false;  // as MPI initialised below MPI_THREAD_SERIALIZED
  Mlp mlp(1);
  GradSync sync(peer, mlp.parameters(), GradSyncOptions{48});
  EXPECT_FALSE(sync.overlaps_backward());
  for (int step = 0; step < 2; ++step) {
    sync.zero_grad();
    sync.prepare_for_backward();
    mlp.loss(mlp.batch(2)).backward();
    sync.synchronize();
  }
  EXPECT_EQ(peer.threads.size(), 2 * sync.bucket_count());
  for (const auto& id : peer.threads) EXPECT_EQ(id, std::this_thread::get_id());
}

}  // namespace
}  // namespace tenax::sdk
