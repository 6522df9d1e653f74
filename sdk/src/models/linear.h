// A torch::nn::Linear applied the way Python's torch.nn.Linear applies it.
//
// The C++ frontend's LinearImpl::forward (torch::nn::functional::linear) runs addmm only for a
// 2-D input; for the [batch, seq, features] activations of a transformer it runs matmul and then
// adds the bias in a second pass over the output. Python calls at::linear, which folds a
// contiguous 3-D input into one addmm with the bias: one pass fewer per layer, and the rounding
// transformers gets (the goldens compare against it).
// Thread-safety: stateless.
#pragma once

#include <torch/nn/modules/linear.h>
#include <torch/types.h>

namespace tenax::sdk::detail {

inline torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& input) {
  return torch::linear(input, layer->weight, layer->bias);
}

}  // namespace tenax::sdk::detail
