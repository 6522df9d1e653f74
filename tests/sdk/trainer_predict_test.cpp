// Trainer::predict / evaluate over 1..3 ranks (threads with real Gloo communicators): every rank
// gets every row, in dataset order, whatever the sharding (sizes that world x batch does not
// divide, a world larger than the dataset); eval mode is used and the previous mode restored;
// evaluate's metrics are prefixed, logged and reported to on_evaluate.
#include <atomic>
#include <filesystem>
#include <mutex>
#include <tuple>
#include <vector>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "support/thread_ranks.h"
#include "tenax/sdk/metrics.h"
#include "tenax/sdk/trainer.h"

namespace tenax::sdk {
namespace {

// x_i: 3 features drawn from a fixed private generator; label i % 2 (int64 scalar).
class Points final : public Dataset {
 public:
  explicit Points(std::int64_t n) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
    x_ = at::randn({n, 3}, gen);
    y_ = torch::arange(n, torch::kInt64).remainder(2);
  }
  std::int64_t size() const override { return x_.size(0); }
  Example get(std::int64_t i) const override { return {x_[i], y_[i]}; }
  const torch::Tensor& x() const { return x_; }
  const torch::Tensor& y() const { return y_; }

 private:
  torch::Tensor x_, y_;
};

// A 2-class linear head behind heavy dropout: in train mode its logits are random, so rows
// that agree across world sizes prove that predict ran in eval mode.
class Classifier final : public Model {
 public:
  Classifier()
      : fc_(register_module("fc", torch::nn::Linear(3, 2))),
        dropout_(register_module("dropout", torch::nn::Dropout(0.5))) {
    // Same weights on every rank thread without touching the (shared) global generator.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
    torch::NoGradGuard no_grad;
    fc_->weight.copy_(at::randn({2, 3}, gen));
    fc_->bias.copy_(at::randn({2}, gen));
  }
  ModelOutput forward(const Batch& batch) override {
    ModelOutput out;
    out.logits = fc_(dropout_(batch.inputs));
    if (batch.labels.defined()) out.loss = torch::cross_entropy_loss(out.logits, batch.labels);
    return out;
  }

 private:
  torch::nn::Linear fc_;
  torch::nn::Dropout dropout_;
};

// Logits are the inputs themselves, so a test can write down the predictions it wants.
class Identity final : public Model {
 public:
  Identity() : unused_(register_parameter("unused", torch::zeros({1}))) {}
  ModelOutput forward(const Batch& batch) override {
    ModelOutput out;
    out.logits = batch.inputs + 0 * unused_;
    if (batch.labels.defined()) out.loss = torch::cross_entropy_loss(out.logits, batch.labels);
    return out;
  }

 private:
  torch::Tensor unused_;
};

TrainingArguments args_with_eval_batch(std::int64_t batch) {
  TrainingArguments a;
  a.output_dir = (std::filesystem::path(::testing::TempDir()) / "tenax-predict-unused").string();
  a.max_steps = 1;
  a.per_device_eval_batch_size = batch;
  return a;
}

class TrainerPredict : public ::testing::TestWithParam<std::tuple<int, std::int64_t>> {};

TEST_P(TrainerPredict, EveryRankGetsEveryRowInDatasetOrder) {
  const auto [world, size] = GetParam();
  auto data = std::make_shared<Points>(size);
  const std::int64_t eval_batch = 4;
  ASSERT_TRUE(size < world || size % (world * eval_batch) != 0) << "the case must need padding";

  Classifier reference;
  reference.eval();
  Batch all;
  all.inputs = data->x();
  const torch::Tensor expected_logits = reference.forward(all).logits.detach();
  const double expected_loss = torch::cross_entropy_loss(expected_logits, data->y()).item<double>();

  std::mutex mutex;
  std::vector<PredictionOutput> outputs;
  testing::run_contexts(world, [&](elastic::WorkerContext& ctx) {
    auto model = std::make_shared<Classifier>();
    Trainer trainer(model, args_with_eval_batch(eval_batch), data, ctx);
    PredictionOutput out = trainer.predict(*data);
    EXPECT_TRUE(model->is_training()) << "predict must give the model back in train mode";
    std::lock_guard<std::mutex> lock(mutex);
    outputs.push_back(std::move(out));
  });

  ASSERT_EQ(outputs.size(), static_cast<std::size_t>(world));
  for (const auto& out : outputs) {
    ASSERT_EQ(out.predictions.sizes(), expected_logits.sizes());
    // Close, not equal: a GEMM's rows may round differently with another batch composition;
    // a row out of place or a dropout mask is off by far more than this.
    EXPECT_TRUE(torch::allclose(out.predictions, expected_logits, 1e-5, 1e-6)) << out.predictions << expected_logits;
    EXPECT_TRUE(torch::equal(out.predictions, outputs.front().predictions)) << "every rank gets the same bytes";
    ASSERT_TRUE(out.label_ids.defined());
    EXPECT_TRUE(torch::equal(out.label_ids, data->y())) << out.label_ids;
    ASSERT_EQ(out.metrics.count("test_loss"), 1u);
    EXPECT_NEAR(out.metrics.at("test_loss"), expected_loss, 1e-6);
    EXPECT_EQ(out.metrics.count("test_runtime"), 1u);
  }
}

// (world, dataset size): 23 is not divisible by world x 4 for any world; 2 < 3 ranks leaves
// rank 2 with no rows at all.
INSTANTIATE_TEST_SUITE_P(Worlds, TrainerPredict,
                         ::testing::Values(std::make_tuple(1, std::int64_t{23}), std::make_tuple(2, std::int64_t{23}),
                                           std::make_tuple(3, std::int64_t{23}), std::make_tuple(3, std::int64_t{2})));

// Ten hand-written logits; predicted class = argmax; 7 of the 10 labels match.
class HandMade final : public Dataset {
 public:
  std::int64_t size() const override { return 10; }
  Example get(std::int64_t i) const override {
    static const float logits[10][2] = {{2, 0}, {0, 1}, {3, 1}, {0, 2}, {1, 0}, {0, 5}, {4, 0}, {1, 2}, {2, 1}, {0, 3}};
    static const std::int64_t labels[10] = {0, 1, 0, 1, 0, 1, 1, 0, 1, 1};  // wrong at 6, 7, 8
    return {torch::tensor({logits[i][0], logits[i][1]}), torch::tensor(labels[i])};
  }
};

class EvaluateRecorder final : public TrainerCallback {
 public:
  void on_evaluate(const TrainingArguments&, TrainerState&, TrainerControl&, const Logs& metrics) override {
    ++calls;
    last = metrics;
  }
  int calls = 0;
  Logs last;
};

TEST(TrainerEvaluate, AccuracyEqualsTheHandComputedValueAndIsReported) {
  auto data = std::make_shared<HandMade>();
  std::vector<Logs> results(2);
  std::vector<int> callback_calls(2, 0);
  std::vector<std::size_t> history(2, 0);
  std::vector<int> was_training(2, -1);
  testing::run_contexts(2, [&](elastic::WorkerContext& ctx) {
    auto model = std::make_shared<Identity>();
    Trainer trainer(model, args_with_eval_batch(3), data, ctx);
    auto recorder = std::make_shared<EvaluateRecorder>();
    trainer.add_callback(recorder);
    const auto r = static_cast<std::size_t>(ctx.rank());
    results[r] = trainer.evaluate(*data, [](const PredictionOutput& p) {
      return std::map<std::string, double>{{"accuracy", accuracy(p.label_id_vector(), p.argmax_vector())}};
    });
    callback_calls[r] = recorder->calls;
    history[r] = trainer.state().log_history.size();
    was_training[r] = model->is_training() ? 1 : 0;
  });
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(results[r].count("eval_accuracy"), 1u) << "rank " << r;
    EXPECT_DOUBLE_EQ(results[r].at("eval_accuracy"), 0.7);
    EXPECT_EQ(results[r].count("accuracy"), 0u) << "metrics carry the eval_ prefix";
    EXPECT_EQ(results[r].count("eval_loss"), 1u);
    EXPECT_EQ(callback_calls[r], 1);
    EXPECT_EQ(history[r], 1u) << "evaluate appends its metrics to log_history";
    EXPECT_EQ(was_training[r], 1);
  }
}

TEST(TrainerEvaluate, APreviousEvalModeIsKept) {
  auto data = std::make_shared<HandMade>();
  testing::run_contexts(1, [&](elastic::WorkerContext& ctx) {
    auto model = std::make_shared<Identity>();
    model->eval();
    Trainer trainer(model, args_with_eval_batch(4), data, ctx);
    trainer.evaluate(*data);
    EXPECT_FALSE(model->is_training());
  });
}

}  // namespace
}  // namespace tenax::sdk
