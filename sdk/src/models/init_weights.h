// transformers' _init_weights for the layer types its text encoders share (BERT, DistilBERT).
// Private to sdk/. Thread-safety: mutates `module`.
#pragma once

#include <torch/nn/module.h>

namespace tenax::sdk::detail {

/// Over every submodule of `module` (not `module` itself, which may still be under construction
/// and so not yet owned by a shared_ptr): Linear and Embedding weights ~ normal(0,
/// initializer_range), biases zero, the Embedding's padding row zero, LayerNorm weight 1 and
/// bias 0. Draws from the default CPU generator.
void init_weights(torch::nn::Module& module, double initializer_range);

}  // namespace tenax::sdk::detail
