// transformers' Adafactor (transformers/optimization.py; Shazeer & Stern 2018) for libtorch:
// per-parameter second moments kept factored (one row and one column vector for a parameter of
// two or more dimensions, a full tensor below that), the update clipped by its RMS, an optional
// first moment (beta1), decoupled weight decay. The arithmetic is transformers' step by step, so
// its goldens hold (tests/sdk/optimizer_goldens_test.cpp, from tools/goldens/schedule_goldens.py).
// The Trainer builds it for optim = "adafactor" as transformers' Trainer does: learning_rate,
// scale_parameter and relative_step off, the schedule setting each step's rate.
// Thread-safety: as any torch::optim::Optimizer (one caller at a time).
//
//   Adafactor optimizer(model->parameters(), AdafactorOptions(1e-3).relative_step(false));
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <torch/optim/optimizer.h>

namespace tenax::sdk {

struct AdafactorOptions : public torch::optim::OptimizerCloneableOptions<AdafactorOptions> {
  /// The external rate; with relative_step it is ignored (transformers: lr=None).
  explicit AdafactorOptions(double lr = 0.0) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, eps1) = 1e-30;  ///< transformers' eps[0]: added to the squared gradient
  TORCH_ARG(double, eps2) = 1e-3;   ///< transformers' eps[1]: the least parameter scale
  TORCH_ARG(double, clip_threshold) = 1.0;
  TORCH_ARG(double, decay_rate) = -0.8;
  TORCH_ARG(std::optional<double>, beta1);  ///< none: no first moment (transformers' default)
  TORCH_ARG(double, weight_decay) = 0.0;
  TORCH_ARG(bool, scale_parameter) = true;
  TORCH_ARG(bool, relative_step) = true;
  TORCH_ARG(bool, warmup_init) = false;

  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
};

/// One parameter's state. exp_avg_sq_row / exp_avg_sq_col for a factored parameter (two or more
/// dimensions), exp_avg_sq otherwise; exp_avg only with beta1. transformers also keeps the
/// parameter's RMS, which each step recomputes before it is read, so it is not state here.
struct AdafactorParamState : public torch::optim::OptimizerCloneableParamState<AdafactorParamState> {
  TORCH_ARG(std::int64_t, step) = 0;
  TORCH_ARG(torch::Tensor, exp_avg);
  TORCH_ARG(torch::Tensor, exp_avg_sq_row);
  TORCH_ARG(torch::Tensor, exp_avg_sq_col);
  TORCH_ARG(torch::Tensor, exp_avg_sq);
};

class Adafactor : public torch::optim::Optimizer {
 public:
  /// Throws ConfigError for transformers' refused combinations (lr with relative_step,
  /// warmup_init without relative_step) and for a rate that is not positive without relative_step.
  Adafactor(std::vector<torch::optim::OptimizerParamGroup> param_groups,
            AdafactorOptions defaults = AdafactorOptions());
  Adafactor(std::vector<torch::Tensor> params, AdafactorOptions defaults = AdafactorOptions());

  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace tenax::sdk
