#include "models/attention.h"

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

namespace tenax::sdk::detail {

torch::Tensor additive_attention_mask(const torch::Tensor& attention_mask, torch::ScalarType dtype) {
  const auto extended = attention_mask.unsqueeze(1).unsqueeze(2).to(dtype);
  const double lowest = dtype == torch::kFloat64    ? std::numeric_limits<double>::lowest()
                        : dtype == torch::kFloat16  ? -65504.0
                        : dtype == torch::kBFloat16 ? -3.3895313892515355e38
                                                    : double(std::numeric_limits<float>::lowest());
  return (1.0 - extended) * lowest;
}

torch::Tensor scaled_dot_product_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                           const torch::Tensor& additive_mask, double dropout_p, bool training) {
  // Same op order as transformers' BertSelfAttention (eager): matmul, then divide.
  auto scores = at::matmul(q, k.transpose(-1, -2));
  scores = scores / std::sqrt(static_cast<double>(q.size(-1)));
  if (additive_mask.defined()) scores = scores + additive_mask;
  auto probs = at::softmax(scores, -1);
  if (training && dropout_p > 0.0) probs = at::dropout(probs, dropout_p, /*train=*/true);
  return at::matmul(probs, v);
}

}  // namespace tenax::sdk::detail
