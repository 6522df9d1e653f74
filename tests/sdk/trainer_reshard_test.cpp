// Elastic resume across world sizes (DESIGN.md decisions 3 and 4): a checkpoint written by N
// ranks resumes on M ranks with the same global batch and continues the very same global
// sample sequence — no sample skipped, none repeated; a changed global batch is refused.
// Ranks run as threads (tests/support/thread_ranks.h) with real Gloo communicators.
#include <algorithm>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/temp_dir.h"
#include "support/thread_ranks.h"
#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/sdk/trainer.h"

namespace tenax::sdk {
namespace {

// Records, per rank thread, the sample indices it fetched, in order.
class RecordingData final : public Dataset {
 public:
  RecordingData() {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
    x_ = at::randn({96, 3}, gen);
    y_ = x_.sum(1, true);
  }
  std::int64_t size() const override { return x_.size(0); }
  Example get(std::int64_t i) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    seen_[std::this_thread::get_id()].push_back(i);
    return {x_[i], y_[i]};
  }
  // Step (1-based, counted from `first_step`) → sorted union of what every rank fetched for it:
  // each rank fetches exactly `per_device` samples per step, in step order.
  std::map<std::int64_t, std::vector<std::int64_t>> batches(std::int64_t first_step, std::int64_t per_device) const {
    std::map<std::int64_t, std::vector<std::int64_t>> out;
    for (const auto& [thread, seq] : seen_) {
      for (std::size_t i = 0; i < seq.size(); ++i) {
        out[first_step + 1 + static_cast<std::int64_t>(i) / per_device].push_back(seq[i]);
      }
    }
    for (auto& [step, b] : out) std::sort(b.begin(), b.end());
    return out;
  }

 private:
  torch::Tensor x_, y_;
  mutable std::mutex mutex_;
  mutable std::map<std::thread::id, std::vector<std::int64_t>> seen_;
};

class Linear final : public Model {
 public:
  Linear() : fc_(register_module("fc", torch::nn::Linear(3, 1))) {}
  ModelOutput forward(const Batch& batch) override {
    ModelOutput out;
    out.logits = fc_(batch.inputs);
    out.loss = torch::mse_loss(out.logits, batch.labels);
    return out;
  }

 private:
  torch::nn::Linear fc_;
};

TrainingArguments args_for(const std::filesystem::path& dir, std::int64_t max_steps, std::int64_t per_device) {
  TrainingArguments a;
  a.output_dir = dir.string();
  a.max_steps = max_steps;
  a.save_steps = 8;
  a.logging_steps = 4;
  a.per_device_train_batch_size = per_device;
  a.learning_rate = 1e-2;
  a.seed = 77;
  return a;
}

std::filesystem::path fresh_dir(const std::string& name) { return tenax::testing::fresh_path("reshard", name); }

// Stops training after a given step, as a job cut short would (the arguments stay those of the
// whole run: a resume with another max_steps is refused, it would change the schedule).
struct StopAfter final : TrainerCallback {
  explicit StopAfter(std::int64_t step) : step_(step) {}
  void on_step_end(const TrainingArguments&, TrainerState& s, TrainerControl& c) override {
    if (s.global_step == step_) c.should_training_stop = true;
  }
  std::int64_t step_;
};

// Trains `world` thread-ranks to max_steps (or to `stop_after`) on `dir`; returns the global
// batch of every step run.
std::map<std::int64_t, std::vector<std::int64_t>> train(const std::filesystem::path& dir, int world,
                                                        std::int64_t max_steps, std::int64_t per_device,
                                                        std::int64_t stop_after = -1) {
  RecordingData data;
  auto shared_data = std::shared_ptr<const Dataset>(&data, [](const Dataset*) {});
  std::int64_t first_step = 0;
  std::int64_t per_rank_per_step = per_device;  // per_device x the run's accumulation
  testing::run_contexts(world, [&](elastic::WorkerContext& ctx) {
    torch::manual_seed(3);
    Trainer trainer(std::make_shared<Linear>(), args_for(dir, max_steps, per_device), shared_data, ctx);
    if (stop_after > 0) trainer.add_callback(std::make_shared<StopAfter>(stop_after));
    trainer.train();
    if (ctx.rank() == 0) {
      first_step = std::max<std::int64_t>(0, trainer.state().resumed_from_step);
      per_rank_per_step = trainer.state().train_batch_size / world;
    }
  });
  return data.batches(first_step, per_rank_per_step);
}

TEST(SdkTrainerReshard, TwoRanksThenOneRankConsumeTheUninterruptedSampleSequence) {
  // Reference: one rank x 8 for 24 steps: 96 samples / 8 = 12 steps per epoch, 2 epochs.
  const auto reference = train(fresh_dir("ref"), 1, 24, 8);
  ASSERT_EQ(reference.size(), 24u);

  const auto dir = fresh_dir("2to1");
  auto first = train(dir, 2, 24, 4, 16);  // 2 ranks x 4 = the same global batch of 8; stops at 16
  auto second = train(dir, 1, 24, 8);     // resumes from step 16 on 1 rank
  ASSERT_EQ(first.size(), 16u);
  ASSERT_EQ(second.size(), 8u) << "the 1-rank run must start at step 16, not repeat or skip steps";
  for (std::int64_t step = 1; step <= 24; ++step) {
    const auto& got = step <= 16 ? first.at(step) : second.at(step);
    EXPECT_EQ(got, reference.at(step)) << "global batch of step " << step;
  }
  // Every sample exactly once per epoch (96 samples / 8 per step = 12 steps per epoch).
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<std::int64_t> all;
    for (std::int64_t step = 12 * epoch + 1; step <= 12 * (epoch + 1); ++step) {
      const auto& b = step <= 16 ? first.at(step) : second.at(step);
      all.insert(all.end(), b.begin(), b.end());
    }
    std::sort(all.begin(), all.end());
    std::vector<std::int64_t> expected(96);
    for (std::int64_t i = 0; i < 96; ++i) expected[static_cast<std::size_t>(i)] = i;
    EXPECT_EQ(all, expected) << "epoch " << epoch;
  }
}

TEST(SdkTrainerReshard, OneRankThenThreeRanksContinueTheSequence) {
  const auto reference = train(fresh_dir("ref3"), 1, 20, 12);
  const auto dir = fresh_dir("1to3");
  auto first = train(dir, 1, 20, 12, 8);
  auto second = train(dir, 3, 20, 4);  // 3 x 4 = 12
  ASSERT_EQ(second.size(), 12u);
  for (std::int64_t step = 9; step <= 20; ++step) EXPECT_EQ(second.at(step), reference.at(step)) << step;
}

TEST(SdkTrainerReshard, FewerRanksKeepTheGlobalBatchThroughGradientAccumulation) {
  // DESIGN.md decision 4: 2 ranks x 4 wrote it; 1 rank x 4 resumes with accumulation 2.
  const auto reference = train(fresh_dir("ref-acc"), 2, 24, 4);
  const auto dir = fresh_dir("2to1acc");
  train(dir, 2, 24, 4, 16);
  const auto second = train(dir, 1, 24, 4);
  ASSERT_EQ(second.size(), 8u) << "resumed at step 16";
  for (std::int64_t step = 17; step <= 24; ++step) EXPECT_EQ(second.at(step), reference.at(step)) << step;
}

TEST(SdkTrainerReshard, AGlobalBatchTheNewWorldCannotDivideIsRefusedNamingTheField) {
  const auto dir = fresh_dir("batch");
  train(dir, 2, 16, 4, 8);  // global batch 8
  try {
    train(dir, 3, 16, 4);  // 3 x 4 = 12 does not divide 8
    ADD_FAILURE() << "a resume that cannot keep the global batch must be refused";
  } catch (const ConfigError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("per_device_train_batch_size"), std::string::npos) << what;
    EXPECT_NE(what.find("global batch of 8"), std::string::npos) << what;
  }
}

// Gradient accumulation 4 x 8 gives the same parameters as one batch of 32, up to float
// summation order (the loss is averaged over the same 32 samples either way).
TEST(SdkTrainerAccumulation, FourMicroBatchesOfEightEqualOneBatchOfThirtyTwo) {
  auto run_with = [](const std::string& name, std::int64_t per_device, std::int64_t accumulation) {
    const auto dir = fresh_dir(name);
    RecordingData data;
    auto shared_data = std::shared_ptr<const Dataset>(&data, [](const Dataset*) {});
    elastic::WorkerContext ctx(elastic::WorkerIdentity{}, nullptr, elastic::make_local_communicator());
    torch::manual_seed(11);
    auto model = std::make_shared<Linear>();
    TrainingArguments args = args_for(dir, 12, per_device);
    args.gradient_accumulation_steps = accumulation;
    // A large epsilon makes AdamW's update depend on the gradient's scale (with the default it
    // is nearly scale-free), so a missing 1/accumulation would show in the parameters.
    args.adam_epsilon = 1.0;
    Trainer trainer(model, args, shared_data, ctx);
    const TrainOutput out = trainer.train();
    return std::make_tuple(model->parameters(), data.batches(0, per_device * accumulation), out.training_loss);
  };
  const auto [accumulated, batches_a, loss_a] = run_with("acc4x8", 8, 4);
  const auto [single, batches_b, loss_b] = run_with("acc1x32", 32, 1);
  EXPECT_EQ(batches_a, batches_b) << "the same samples in every step";
  EXPECT_NEAR(loss_a, loss_b, 1e-5 * std::abs(loss_b)) << "the step's loss is the mean over its 32 samples";
  ASSERT_EQ(accumulated.size(), single.size());
  for (std::size_t i = 0; i < single.size(); ++i) {
    EXPECT_TRUE(torch::allclose(accumulated[i], single[i], /*rtol=*/1e-5, /*atol=*/1e-6))
        << "parameter " << i << ": max diff " << (accumulated[i] - single[i]).abs().max().item<float>();
  }
}

}  // namespace
}  // namespace tenax::sdk
