#include "tenax/sdk/adafactor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

#include <torch/torch.h>

#include "tenax/core/error.h"
#include "torch_compat.h"

namespace tenax::sdk {
namespace {

void check(const AdafactorOptions& o) {
  // transformers raises these two; a rate of zero without relative_step would train nothing.
  if (o.relative_step() && o.lr() > 0.0) {
    throw ConfigError("Adafactor: a learning rate cannot be combined with relative_step (set relative_step false)");
  }
  if (o.warmup_init() && !o.relative_step()) throw ConfigError("Adafactor: warmup_init needs relative_step");
  if (!o.relative_step() && !(o.lr() > 0.0)) {
    throw ConfigError("Adafactor: without relative_step the learning rate must be positive, got " +
                      std::to_string(o.lr()));
  }
}

torch::Tensor rms(const torch::Tensor& t) { return t.norm(2) / std::sqrt(static_cast<double>(t.numel())); }

// The rate of this step (transformers' Adafactor._get_lr); `param_rms` is read only with
// scale_parameter.
double step_lr(const AdafactorOptions& o, std::int64_t step, const torch::Tensor& param_rms) {
  double rel_step = o.lr();
  if (o.relative_step()) {
    const double min_step = o.warmup_init() ? 1e-6 * static_cast<double>(step) : 1e-2;
    rel_step = std::min(min_step, 1.0 / std::sqrt(static_cast<double>(step)));
  }
  double param_scale = 1.0;
  if (o.scale_parameter()) param_scale = std::max(o.eps2(), param_rms.item<double>());
  return param_scale * rel_step;
}

torch::Tensor approx_sq_grad(const torch::Tensor& row, const torch::Tensor& col) {
  const torch::Tensor r_factor = (row / row.mean(-1, /*keepdim=*/true)).rsqrt_().unsqueeze(-1);
  const torch::Tensor c_factor = col.unsqueeze(-2).rsqrt();
  return torch::mul(r_factor, c_factor);
}

}  // namespace

Adafactor::Adafactor(std::vector<torch::optim::OptimizerParamGroup> param_groups, AdafactorOptions defaults)
    : Optimizer(param_groups, std::make_unique<AdafactorOptions>(defaults)) {
  compat::keep_group_options(*this, param_groups);  // torch 2.15 gives a group of ours the defaults
  for (const auto& group : this->param_groups()) check(static_cast<const AdafactorOptions&>(group.options()));
}

Adafactor::Adafactor(std::vector<torch::Tensor> params, AdafactorOptions defaults)
    : Adafactor({torch::optim::OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

torch::Tensor Adafactor::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const AdafactorOptions&>(group.options());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      torch::Tensor grad = p.grad();
      if (grad.is_sparse()) throw ConfigError("Adafactor does not support sparse gradients");
      if (grad.scalar_type() == torch::kHalf || grad.scalar_type() == torch::kBFloat16) grad = grad.to(torch::kFloat);
      const bool factored = grad.dim() >= 2;
      auto& slot = state()[compat::optimizer_state_key(p)];
      if (!slot) {
        auto fresh = std::make_unique<AdafactorParamState>();
        if (o.beta1()) fresh->exp_avg(torch::zeros_like(grad));
        if (factored) {
          std::vector<std::int64_t> row(grad.sizes().begin(), grad.sizes().end() - 1);
          std::vector<std::int64_t> col(grad.sizes().begin(), grad.sizes().end() - 2);
          col.push_back(grad.size(-1));
          fresh->exp_avg_sq_row(torch::zeros(row, grad.options()));
          fresh->exp_avg_sq_col(torch::zeros(col, grad.options()));
        } else {
          fresh->exp_avg_sq(torch::zeros_like(grad));
        }
        slot = std::move(fresh);
      }
      auto& s = static_cast<AdafactorParamState&>(*slot);
      torch::Tensor p32 = p;
      const bool low_precision = p.scalar_type() == torch::kHalf || p.scalar_type() == torch::kBFloat16;
      if (low_precision) p32 = p.to(torch::kFloat);

      s.step(s.step() + 1);
      const double lr = step_lr(o, s.step(), o.scale_parameter() ? rms(p32) : torch::Tensor());
      const double beta2t = 1.0 - std::pow(static_cast<double>(s.step()), o.decay_rate());
      torch::Tensor update = grad.pow(2) + o.eps1();
      if (factored) {
        s.exp_avg_sq_row().mul_(beta2t).add_(update.mean(-1), 1.0 - beta2t);
        s.exp_avg_sq_col().mul_(beta2t).add_(update.mean(-2), 1.0 - beta2t);
        update = approx_sq_grad(s.exp_avg_sq_row(), s.exp_avg_sq_col());
        update.mul_(grad);
      } else {
        s.exp_avg_sq().mul_(beta2t).add_(update, 1.0 - beta2t);
        update = s.exp_avg_sq().rsqrt().mul_(grad);
      }
      update.div_((rms(update) / o.clip_threshold()).clamp_(1.0));
      update.mul_(lr);
      if (o.beta1()) {
        s.exp_avg().mul_(*o.beta1()).add_(update, 1.0 - *o.beta1());
        update = s.exp_avg();
      }
      if (o.weight_decay() != 0.0) p32.add_(p32, -o.weight_decay() * lr);
      p32.add_(-update);
      if (low_precision) p.copy_(p32);
    }
  }
  return loss;
}

}  // namespace tenax::sdk
