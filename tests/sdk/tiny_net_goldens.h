// The optimizer goldens' replay (adamw_golden_test.cpp, optimizer_goldens_test.cpp):
// tools/goldens/schedule_goldens.py's TinyNet, with the same module names and order, at the
// goldens' initial weights, stepped as the script steps it (linear schedule with warmup,
// clip_grad_norm_) by the optimizer a test builds, and compared with the goldens' parameters.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tenax/sdk/lr_schedule.h"
#include "tenax/sdk/state_capture.h"

namespace tenax::sdk::golden_replay {

/// Linear -> tanh -> LayerNorm -> Linear; the LayerNorm's name does not say what it is.
class TinyNet : public torch::nn::Module {
 public:
  TinyNet(std::int64_t in, std::int64_t hidden, std::int64_t out)
      : encoder_(register_module("encoder", torch::nn::Linear(in, hidden))),
        post_(register_module("post", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})))),
        head_(register_module("head", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(const torch::Tensor& x) { return head_(post_(torch::tanh(encoder_(x)))); }

 private:
  torch::nn::Linear encoder_;
  torch::nn::LayerNorm post_;
  torch::nn::Linear head_;
};

/// The goldens hold float32 values written as doubles: the conversion back is exact.
inline torch::Tensor float_tensor(const nlohmann::json& values, std::vector<std::int64_t> shape) {
  return torch::tensor(values.get<std::vector<double>>(), torch::kFloat64).to(torch::kFloat32).reshape(shape);
}

inline NamedTensors named_parameters(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& item : model.named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

/// One replay of a golden run `g` (a JSON object with config, shapes, initial, inputs, targets,
/// steps_count and steps): the model at its initial weights, the optimizer `make` builds over
/// it, the schedule.
class Replay {
 public:
  using MakeOptimizer = std::function<std::unique_ptr<torch::optim::Optimizer>(TinyNet&)>;

  Replay(const nlohmann::json& g, const MakeOptimizer& make) : g_(g), c_(g.at("config")) {
    model_ = std::make_shared<TinyNet>(c_.at("in").get<std::int64_t>(), c_.at("hidden").get<std::int64_t>(),
                                       c_.at("out").get<std::int64_t>());
    {
      torch::NoGradGuard no_grad;
      for (auto& item : model_->named_parameters()) {
        const auto shape = g_.at("shapes").at(item.key()).get<std::vector<std::int64_t>>();
        item.value().copy_(float_tensor(g_.at("initial").at(item.key()), shape));
      }
    }
    steps_ = g_.at("steps_count").get<std::int64_t>();
    const std::int64_t batch = c_.at("batch").get<std::int64_t>();
    inputs_ = float_tensor(g_.at("inputs"), {steps_, batch, c_.at("in").get<std::int64_t>()});
    targets_ = float_tensor(g_.at("targets"), {steps_, batch, c_.at("out").get<std::int64_t>()});
    optimizer_ = make(*model_);
    schedule_ = std::make_unique<LrSchedule>(
        LrScheduleOptions(LrSchedulerType::kLinear, c_.at("warmup_steps").get<std::int64_t>(), steps_)
            .base_lr(c_.at("lr").get<double>()));
  }

  /// Optimizer step `step` (0-based) as the script runs it; returns the unclipped gradient norm.
  double step(std::int64_t step) {
    optimizer_->zero_grad();
    loss_ = torch::mse_loss(model_->forward(inputs_[step]), targets_[step]);
    loss_.backward();
    const double grad_norm = torch::nn::utils::clip_grad_norm_(model_->parameters(), max_grad_norm());
    lr_ = schedule_->lr(step);
    for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr_);
    optimizer_->step();
    return grad_norm;
  }

  /// Compares every parameter with the goldens after optimizer step `step` (0-based).
  void expect_parameters_after(std::int64_t step, double tolerance) const {
    const nlohmann::json& expected = g_.at("steps")[static_cast<std::size_t>(step)].at("params");
    for (const auto& item : model_->named_parameters()) {
      const torch::Tensor want = float_tensor(expected.at(item.key()), item.value().sizes().vec());
      const double diff = (item.value().detach() - want).abs().max().item<double>();
      EXPECT_LE(diff, tolerance) << item.key() << " after step " << step + 1;
    }
  }

  /// A copy of the parameters ("model/<name>") and of the optimizer's state
  /// (capture_optimizer_state's names) as they stand: what a checkpoint holds.
  std::map<std::string, torch::Tensor> saved_state() {
    std::map<std::string, torch::Tensor> saved;
    const NamedTensors params = named_parameters(*model_);
    for (const auto& [name, p] : params) saved["model/" + name] = p.detach().clone();
    for (auto& [name, t] : capture_optimizer_state(*optimizer_, params)) saved[name] = t;
    return saved;
  }
  /// Puts another replay's saved_state() into this one's parameters and optimizer.
  void restore(const std::map<std::string, torch::Tensor>& saved) {
    const NamedTensors params = named_parameters(*model_);
    {
      torch::NoGradGuard no_grad;
      for (const auto& [name, p] : params) p.copy_(saved.at("model/" + name));
    }
    restore_optimizer_state(*optimizer_, params, [&](const std::string& name) {
      const auto it = saved.find(name);
      return it == saved.end() ? torch::Tensor() : it->second;
    });
  }

  const nlohmann::json& config() const { return c_; }
  double max_grad_norm() const { return c_.at("max_grad_norm").get<double>(); }
  std::int64_t steps() const { return steps_; }
  TinyNet& model() { return *model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  double lr() const { return lr_; }
  double loss() const { return loss_.item<double>(); }

 private:
  const nlohmann::json& g_;
  const nlohmann::json& c_;
  std::shared_ptr<TinyNet> model_;
  std::int64_t steps_ = 0;
  torch::Tensor inputs_, targets_, loss_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  double lr_ = 0.0;
};

}  // namespace tenax::sdk::golden_replay
