#include "models/classification_loss.h"

#include <torch/nn/functional/loss.h>

#include "tenax/core/error.h"

namespace tenax::sdk::detail {

torch::Tensor classification_loss(PretrainedConfig& config, const torch::Tensor& logits, const torch::Tensor& labels) {
  namespace F = torch::nn::functional;
  const std::int64_t n = config.num_labels();
  if (!config.problem_type) {  // transformers decides once and remembers it in the config
    if (n == 1) {
      config.problem_type = ProblemType::kRegression;
    } else if (labels.scalar_type() == torch::kInt64 || labels.scalar_type() == torch::kInt32) {
      config.problem_type = ProblemType::kSingleLabelClassification;
    } else {
      config.problem_type = ProblemType::kMultiLabelClassification;
    }
  }
  switch (*config.problem_type) {
    case ProblemType::kRegression:
      if (n == 1) return F::mse_loss(logits.squeeze(), labels.squeeze().to(logits.scalar_type()));
      return F::mse_loss(logits, labels.to(logits.scalar_type()));
    case ProblemType::kSingleLabelClassification: return F::cross_entropy(logits.view({-1, n}), labels.view({-1}));
    case ProblemType::kMultiLabelClassification:
      return F::binary_cross_entropy_with_logits(logits, labels.to(logits.scalar_type()));
  }
  throw ConfigError("unknown problem_type");
}

}  // namespace tenax::sdk::detail
