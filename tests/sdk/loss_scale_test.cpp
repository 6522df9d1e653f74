// fp16's loss scaling, its two halves by table (sdk/src/loss_scaling.h): torch.amp.GradScaler's
// update rule (torch/csrc: _amp_update_scale_) and its unscale-and-check; the state's JSON.
// The Trainer's use of them (skipped steps, bit-exact resume) is in trainer_resume_test.cpp.
#include "loss_scaling.h"

#include <limits>

#include <torch/torch.h>

#include <gtest/gtest.h>

#include "config_error.h"
#include "tenax/core/error.h"
#include "tenax/sdk/trainer_callback.h"

namespace tenax::sdk {
namespace {

struct UpdateCase {
  const char* name;
  LossScaleState before;
  bool found_inf;
  LossScaleState after;
};

TEST(SdkLossScale, UpdateFollowsTorchGradScaler) {
  GradScalerOptions options;  // 2^16, x2, x0.5, every 2000
  const UpdateCase cases[] = {
      {"an overflow halves the scale and resets the tracker", {65536.0, 1234, 0}, true, {32768.0, 0, 1}},
      {"a good step counts", {65536.0, 0, 3}, false, {65536.0, 1, 3}},
      {"the 2000th good step in a row doubles the scale", {65536.0, 1999, 3}, false, {131072.0, 0, 3}},
      {"a scale that would overflow float32 stays", {3.0e38, 1999, 0}, false, {static_cast<float>(3.0e38), 0, 0}},
      {"below 1 the scale goes on halving", {1.0, 0, 7}, true, {0.5, 0, 8}},
  };
  for (const UpdateCase& c : cases) {
    EXPECT_EQ(detail::next_loss_scale(c.before, c.found_inf, options), c.after) << c.name;
  }
  // torch computes in float32: a scale that is not one is rounded as float32 before it is scaled.
  options.backoff_factor = 0.1;
  EXPECT_EQ(detail::next_loss_scale({1000.0, 0, 0}, true, options).scale, 1000.0f * 0.1f);
}

TEST(SdkLossScale, SequenceWithOverflowsAndGrowth) {
  GradScalerOptions options;
  options.init_scale = 8.0;
  options.growth_interval = 2;
  LossScaleState s{options.init_scale, 0, 0};
  std::vector<double> scales;
  for (bool inf : {false, false, true, false, true, true, false, false, false}) {
    s = detail::next_loss_scale(s, inf, options);
    scales.push_back(s.scale);
  }
  EXPECT_EQ(scales, (std::vector<double>{8, 16, 8, 8, 4, 2, 2, 4, 4}));
  EXPECT_EQ(s.skipped_steps, 3);
  EXPECT_EQ(s.growth_tracker, 1);
}

TEST(SdkLossScale, UnscaleDividesEveryGradientAndFindsInfAndNan) {
  auto param = [](std::vector<float> grad) {
    torch::Tensor p = torch::zeros({static_cast<std::int64_t>(grad.size())}).requires_grad_(true);
    p.mutable_grad() = torch::tensor(grad);
    return p;
  };
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<torch::Tensor> finite = {param({1024.f, -2048.f}), param({512.f}), torch::zeros({2})};
  EXPECT_FALSE(detail::unscale_gradients(finite, 1024.0));
  EXPECT_TRUE(torch::equal(finite[0].grad(), torch::tensor({1.f, -2.f})));
  EXPECT_TRUE(torch::equal(finite[1].grad(), torch::tensor({0.5f})));
  EXPECT_FALSE(finite[2].grad().defined()) << "a parameter without a gradient is left alone";

  std::vector<torch::Tensor> with_inf = {param({1.f}), param({inf, 2.f})};
  EXPECT_TRUE(detail::unscale_gradients(with_inf, 2.0));
  EXPECT_TRUE(torch::equal(with_inf[0].grad(), torch::tensor({0.5f}))) << "every gradient is unscaled";
  std::vector<torch::Tensor> with_nan = {param({std::nanf("")})};
  EXPECT_TRUE(detail::unscale_gradients(with_nan, 2.0));
}

TEST(SdkLossScale, TravelsInTheTrainerStateAndAMalformedOneIsRefused) {
  TrainerState state;
  EXPECT_FALSE(TrainerState::from_json(state.to_json()).loss_scale) << "no fp16, no loss scale";
  state.loss_scale = LossScaleState{2048.0, 17, 5};
  const TrainerState back = TrainerState::from_json(state.to_json());
  ASSERT_TRUE(back.loss_scale);
  EXPECT_EQ(*back.loss_scale, *state.loss_scale);

  nlohmann::json json = state.to_json();
  json["loss_scale"]["scale"] = -1.0;
  EXPECT_THROW(TrainerState::from_json(json), StorageError);
  json["loss_scale"] = {{"scale", 2048.0}};
  try {
    TrainerState::from_json(json);
    FAIL() << "a loss_scale without growth_tracker was read";
  } catch (const StorageError& e) {
    EXPECT_TRUE(test_support::contains(e.what(), "growth_tracker")) << e.what();
  }
}

TEST(SdkLossScale, Fp16AndBf16TogetherAreRefused) {
  TrainingArguments args;
  args.output_dir = "/tmp/unused";
  args.max_steps = 1;
  args.fp16 = true;
  args.bf16 = true;
  const std::string message = test_support::config_error([&] { args.validate(); });
  EXPECT_TRUE(test_support::contains(message, "TrainingArguments.fp16")) << message;
  EXPECT_TRUE(test_support::contains(message, "bf16")) << message;
  args.bf16 = false;
  EXPECT_NO_THROW(args.validate());
}

}  // namespace
}  // namespace tenax::sdk
