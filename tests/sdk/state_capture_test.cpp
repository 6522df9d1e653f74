#include "tenax/sdk/state_capture.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

namespace tenax::sdk {
namespace {

NamedTensors named(torch::nn::Module& m) {
  NamedTensors out;
  for (auto& p : m.named_parameters()) out.emplace_back(p.key(), p.value());
  return out;
}

void train_steps(torch::nn::Sequential& net, torch::optim::AdamW& opt, int steps) {
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    auto x = torch::randn({8, 4});
    auto loss = net->forward(x).pow(2).mean();
    loss.backward();
    opt.step();
  }
}

TEST(SdkStateCapture, CpuRngReplaysDropoutExactly) {
  torch::manual_seed(3);
  auto state = capture_cpu_rng_state();
  auto a = torch::dropout(torch::ones({1000}), 0.5, true);
  restore_cpu_rng_state(state);
  auto b = torch::dropout(torch::ones({1000}), 0.5, true);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_THROW(restore_cpu_rng_state(torch::zeros({3}, torch::kFloat32)), std::exception);
}

TEST(SdkStateCapture, AdamWStateRoundTripGivesBitIdenticalNextSteps) {
  auto make = [] {
    torch::manual_seed(11);
    return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::Tanh(), torch::nn::Linear(8, 1));
  };
  auto net_a = make();
  torch::optim::AdamW opt_a(net_a->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  torch::manual_seed(5);
  train_steps(net_a, opt_a, 3);

  // Snapshot parameters, optimizer and RNG; continue A for 4 steps.
  auto saved_opt = capture_optimizer_state(opt_a, named(*net_a));
  ASSERT_EQ(saved_opt.size(), 4u * 3u);  // 4 parameters x {exp_avg, exp_avg_sq, step}
  std::map<std::string, torch::Tensor> saved(saved_opt.begin(), saved_opt.end());
  NamedTensors saved_params;
  for (auto& [n, p] : named(*net_a)) saved_params.emplace_back(n, p.detach().clone());
  auto rng = capture_cpu_rng_state();
  train_steps(net_a, opt_a, 4);

  // B: a fresh model and optimizer restored from the snapshot must land on the same bits.
  auto net_b = make();
  {
    torch::NoGradGuard ng;
    auto params_b = named(*net_b);
    for (size_t i = 0; i < params_b.size(); ++i) params_b[i].second.copy_(saved_params[i].second);
  }
  torch::optim::AdamW opt_b(net_b->parameters(), torch::optim::AdamWOptions(1e-2).weight_decay(0.1));
  restore_optimizer_state(opt_b, named(*net_b), [&](const std::string& n) {
    auto it = saved.find(n);
    return it == saved.end() ? torch::Tensor() : it->second;
  });
  restore_cpu_rng_state(rng);
  train_steps(net_b, opt_b, 4);

  auto pa = named(*net_a), pb = named(*net_b);
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
  }
}

TEST(SdkStateCapture, ShapeMismatchIsRejected) {
  torch::nn::Linear lin(3, 2);
  torch::optim::AdamW opt(lin->parameters(), torch::optim::AdamWOptions(1e-3));
  EXPECT_THROW(restore_optimizer_state(opt, named(*lin),
                                       [](const std::string& n) {
                                         if (n.find("step") != std::string::npos) return torch::tensor(int64_t{1});
                                         return torch::zeros({7});
                                       }),
               std::exception);
}

}  // namespace
}  // namespace tenax::sdk
