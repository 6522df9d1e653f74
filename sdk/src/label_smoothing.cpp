#include "label_smoothing.h"

#include <string>

#include <c10/core/ScalarType.h>
#include <torch/nn/functional/activation.h>

#include "tenax/core/error.h"

namespace tenax::sdk::detail {

torch::Tensor label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& labels, double epsilon,
                                  std::int64_t ignore_index) {
  if (!c10::isIntegralType(labels.scalar_type(), /*includeBool=*/false)) {
    throw ConfigError(std::string("TrainingArguments.label_smoothing_factor: the labels are ") +
                      c10::toString(labels.scalar_type()) +
                      ", not class indices: label smoothing applies to single-label classification only (a "
                      "regression or multi-label model has no classes to smooth over); set label_smoothing_factor "
                      "= 0");
  }
  const torch::Tensor log_probs = -torch::log_softmax(logits, -1);
  const torch::Tensor index = labels.dim() == log_probs.dim() - 1 ? labels.unsqueeze(-1) : labels;
  const torch::Tensor padding = index.eq(ignore_index);
  torch::Tensor nll = log_probs.gather(-1, index.clamp_min(0));
  torch::Tensor smoothed = log_probs.sum(-1, /*keepdim=*/true, torch::kFloat32);
  nll.masked_fill_(padding, 0.0);
  smoothed.masked_fill_(padding, 0.0);
  const torch::Tensor active = padding.numel() - padding.to(torch::kInt64).sum();
  const torch::Tensor nll_mean = nll.sum() / active;
  const torch::Tensor smoothed_mean = smoothed.sum() / (active * log_probs.size(-1));
  return (1 - epsilon) * nll_mean + epsilon * smoothed_mean;
}

}  // namespace tenax::sdk::detail
