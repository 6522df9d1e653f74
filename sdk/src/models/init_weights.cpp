#include "models/init_weights.h"

#include <torch/nn/init.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

namespace tenax::sdk::detail {

void init_weights(torch::nn::Module& module, double initializer_range) {
  torch::NoGradGuard no_grad;
  for (const auto& child : module.modules(/*include_self=*/false)) {
    // nn::init::normal_ rather than Tensor::normal_: the latter's inline optional<Generator>
    // default trips GCC 12's -Wmaybe-uninitialized in the -O1 sanitizer build.
    if (auto* linear = child->as<torch::nn::Linear>()) {
      torch::nn::init::normal_(linear->weight, 0.0, initializer_range);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* embedding = child->as<torch::nn::Embedding>()) {
      torch::nn::init::normal_(embedding->weight, 0.0, initializer_range);
      if (auto pad = embedding->options.padding_idx()) embedding->weight[*pad].zero_();
    } else if (auto* norm = child->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    }
  }
}

}  // namespace tenax::sdk::detail
