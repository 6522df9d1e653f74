// AdamW as transformers' Trainer runs it, replayed with libtorch: the tiny model, initial
// weights, inputs and per-step parameters of tests/sdk/goldens/adamw_goldens.json (written by
// tools/goldens/schedule_goldens.py with torch.optim.AdamW, transformers' two parameter groups
// and get_scheduler("linear")), against Tenax's decay_parameter_names / decay_param_groups,
// LrSchedule and torch::nn::utils::clip_grad_norm_ — also across a capture and restore of the
// optimizer state (state_capture.h) halfway. The same for the Trainer's FusedAdamW
// (fused_adamw.h), which must give the goldens too, and against libtorch's AdamW directly.
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/optimizer_groups.h"
#include "tenax/sdk/state_capture.h"
#include "tiny_net_goldens.h"
#include "fused_adamw.h"
#include "torch_compat.h"

namespace tenax::sdk {
namespace {

nlohmann::json goldens() {
  const std::string path = std::string(TENAX_SDK_GOLDENS_DIR) + "/adamw_goldens.json";
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  return nlohmann::json::parse(in);
}

using golden_replay::TinyNet;

/// The goldens' replay with torch::optim::AdamW, or with the Trainer's detail::FusedAdamW, which
/// must take its fused path at every step.
class AdamWReplay : public golden_replay::Replay {
 public:
  explicit AdamWReplay(const nlohmann::json& g, bool fused = false)
      : Replay(g, [&g, fused](TinyNet& model) -> std::unique_ptr<torch::optim::Optimizer> {
          const nlohmann::json& c = g.at("config");
          torch::optim::AdamWOptions options(c.at("lr").get<double>());
          options.betas({c.at("betas")[0].get<double>(), c.at("betas")[1].get<double>()})
              .eps(c.at("eps").get<double>())
              .weight_decay(c.at("weight_decay").get<double>());
          if (fused) return std::make_unique<detail::FusedAdamW>(decay_param_groups(model, options), options);
          return std::make_unique<torch::optim::AdamW>(decay_param_groups(model, options), options);
        }) {}

  double step(std::int64_t step) {
    const double grad_norm = Replay::step(step);
    if (auto* fused = dynamic_cast<detail::FusedAdamW*>(&optimizer())) {
      EXPECT_TRUE(fused->last_step_fused()) << "FusedAdamW fell back to libtorch's AdamW at step " << step;
    }
    return grad_norm;
  }
  void expect_parameters_after(std::int64_t step) const { Replay::expect_parameters_after(step, 1e-6); }
};

class SdkAdamWGolden : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    g_ = goldens();
    ASSERT_EQ(g_.at("steps").size(), g_.at("steps_count").get<std::size_t>());
  }
  nlohmann::json g_;
};

TEST_F(SdkAdamWGolden, DecayParameterNamesEqualTransformers) {
  AdamWReplay replay(g_);
  EXPECT_EQ(decay_parameter_names(replay.model()), g_.at("decay_parameter_names").get<std::vector<std::string>>());
  ASSERT_EQ(replay.model().named_parameters().size(), g_.at("initial").size());
  for (const auto& item : replay.model().named_parameters()) {
    EXPECT_TRUE(g_.at("initial").contains(item.key())) << item.key() << " is not in the goldens";
  }
}

TEST_F(SdkAdamWGolden, TwoGroupsAsTransformersBuildsThem) {
  AdamWReplay replay(g_);
  auto& groups = replay.optimizer().param_groups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(groups[0].options()).weight_decay(),
            g_.at("config").at("weight_decay").get<double>());
  EXPECT_EQ(static_cast<torch::optim::AdamWOptions&>(groups[1].options()).weight_decay(), 0.0);
  EXPECT_EQ(groups[0].params().size(), 2u);  // encoder.weight, head.weight
  EXPECT_EQ(groups[1].params().size(), 4u);  // the biases and the LayerNorm's two
}

TEST_F(SdkAdamWGolden, TenStepsWithScheduleAndClippingEqualTorch) {
  for (const bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "FusedAdamW" : "torch::optim::AdamW");
    AdamWReplay replay(g_, fused);
    const double base_lr = g_.at("config").at("lr").get<double>();
    int clipped = 0;
    for (std::int64_t step = 0; step < replay.steps(); ++step) {
      const nlohmann::json& expected = g_.at("steps")[static_cast<std::size_t>(step)];
      const double grad_norm = replay.step(step);
      EXPECT_NEAR(replay.lr(), expected.at("lr").get<double>(), 1e-6 * base_lr) << "step " << step;
      EXPECT_NEAR(replay.loss(), expected.at("loss").get<double>(), 1e-6) << "step " << step;
      EXPECT_NEAR(grad_norm, expected.at("grad_norm").get<double>(), 1e-5) << "step " << step;
      clipped += grad_norm > replay.max_grad_norm() ? 1 : 0;
      replay.expect_parameters_after(step);
    }
    // The goldens exercise what they claim: clipping acts in some steps and not in others.
    EXPECT_GT(clipped, 0);
    EXPECT_LT(clipped, replay.steps());
  }
}

// A resume in the middle: parameters and AdamW state of both groups captured by name after
// 4 steps, restored into a fresh model and optimizer, which then go on exactly as the goldens.
TEST_F(SdkAdamWGolden, StateCapturedAndRestoredMidwayContinuesOnTheGoldens) {
  for (const bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "FusedAdamW" : "torch::optim::AdamW");
    constexpr std::int64_t kResumeAt = 4;
    std::map<std::string, torch::Tensor> saved;
    {
      AdamWReplay first(g_, fused);
      for (std::int64_t step = 0; step < kResumeAt; ++step) first.step(step);
      saved = first.saved_state();
    }
    EXPECT_EQ(saved.size(), 6u * 4u) << "6 parameters, each with its value, exp_avg, exp_avg_sq and step";

    AdamWReplay second(g_, fused);
    second.restore(saved);
    for (std::int64_t step = kResumeAt; step < second.steps(); ++step) {
      second.step(step);
      second.expect_parameters_after(step);
    }
  }
}

// FusedAdamW against libtorch's AdamW on tensors large enough to be split over threads and to
// leave vector tails (100,003 elements), two groups (weight decay and none), a parameter
// without a gradient (skipped by both: no state, unchanged), and a different gradient each
// step. The fused arithmetic rounds differently, so close, not equal; a wrong coefficient
// (bias correction, decay, eps) would be off by ~lr = 1e-2.
TEST(SdkFusedAdamW, MatchesLibtorchAdamWOnLargeTensorsAcrossThreads) {
  torch::set_num_threads(2);
  torch::manual_seed(3);
  const std::vector<std::vector<std::int64_t>> shapes = {{100003}, {317, 129}, {7}, {64}};
  std::vector<torch::Tensor> a_params, b_params;
  for (const auto& shape : shapes) {
    a_params.push_back(torch::randn(shape).requires_grad_(true));
    b_params.push_back(a_params.back().detach().clone().requires_grad_(true));
  }
  const auto make = [](std::vector<torch::Tensor> ps, bool fused) -> std::unique_ptr<torch::optim::AdamW> {
    torch::optim::AdamWOptions decay(1e-2), plain(1e-2);
    decay.betas({0.9, 0.99}).eps(1e-6).weight_decay(0.1);
    plain.betas({0.9, 0.99}).eps(1e-6).weight_decay(0.0);
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(std::vector<torch::Tensor>{ps[0], ps[1]}, std::make_unique<torch::optim::AdamWOptions>(decay));
    groups.emplace_back(std::vector<torch::Tensor>{ps[2], ps[3]}, std::make_unique<torch::optim::AdamWOptions>(plain));
    if (fused) return std::make_unique<detail::FusedAdamW>(std::move(groups), decay);
    return std::make_unique<torch::optim::AdamW>(std::move(groups), decay);
  };
  auto reference = make(a_params, false);
  auto fused = make(b_params, true);
  const torch::Tensor frozen_before = b_params[3].detach().clone();
  for (int step = 0; step < 6; ++step) {
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      if (k == 3) continue;  // never gets a gradient
      const torch::Tensor g = torch::randn(shapes[k]) * (step + 1);
      a_params[k].mutable_grad() = g.clone();
      b_params[k].mutable_grad() = g.clone();
    }
    reference->step();
    fused->step();
    ASSERT_TRUE(static_cast<detail::FusedAdamW&>(*fused).last_step_fused()) << "step " << step;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      const double diff = (a_params[k] - b_params[k]).abs().max().item<double>();
      EXPECT_LE(diff, 4e-6) << "parameter " << k << " after step " << step + 1;
    }
  }
  EXPECT_TRUE(torch::equal(b_params[3], frozen_before)) << "a parameter without a gradient must not move";
  EXPECT_EQ(fused->state().size(), 3u) << "state for the three parameters that had gradients";
  const auto& s =
      static_cast<torch::optim::AdamWParamState&>(*fused->state().at(compat::optimizer_state_key(b_params[0])));
  EXPECT_EQ(s.step(), 6);
}

// A step with a closure (the gradients exist only once step() has run it) is libtorch's.
TEST(SdkFusedAdamW, AStepWithAClosureIsLibtorchsExactly) {
  torch::manual_seed(5);
  const torch::Tensor x = torch::randn({8, 4});
  torch::Tensor a = torch::randn({4, 3}).requires_grad_(true);
  torch::Tensor b = a.detach().clone().requires_grad_(true);
  torch::optim::AdamW reference(std::vector<torch::Tensor>{a}, torch::optim::AdamWOptions(1e-2));
  detail::FusedAdamW fused(std::vector<torch::Tensor>{b}, torch::optim::AdamWOptions(1e-2));
  const auto closure_of = [&](torch::optim::Optimizer& o, torch::Tensor& w) {
    return [&] {
      o.zero_grad();
      torch::Tensor loss = x.mm(w).pow(2).sum();
      loss.backward();
      return loss;
    };
  };
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor la = reference.step(closure_of(reference, a));
    const torch::Tensor lb = fused.step(closure_of(fused, b));
    EXPECT_FALSE(fused.last_step_fused());
    EXPECT_TRUE(torch::equal(la, lb)) << "the closure's loss is returned, step " << step;
    EXPECT_TRUE(torch::equal(a, b)) << "step " << step;
  }
}

// What the fused paths do not take (amsgrad here) goes to libtorch's AdamW, exactly.
TEST(SdkFusedAdamW, AmsgradFallsBackToLibtorchExactly) {
  torch::manual_seed(4);
  torch::Tensor a = torch::randn({1000}).requires_grad_(true);
  torch::Tensor b = a.detach().clone().requires_grad_(true);
  torch::optim::AdamWOptions options(1e-2);
  options.amsgrad(true).weight_decay(0.05);
  torch::optim::AdamW reference(std::vector<torch::Tensor>{a}, options);
  detail::FusedAdamW fused(std::vector<torch::Tensor>{b}, options);
  for (int step = 0; step < 3; ++step) {
    const torch::Tensor g = torch::randn({1000});
    a.mutable_grad() = g.clone();
    b.mutable_grad() = g.clone();
    reference.step();
    fused.step();
    EXPECT_FALSE(fused.last_step_fused());
    EXPECT_TRUE(torch::equal(a, b)) << "step " << step;
  }
}

}  // namespace
}  // namespace tenax::sdk
