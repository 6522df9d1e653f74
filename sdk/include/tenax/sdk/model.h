// The model contract of the Trainer: a torch::nn::Module whose forward takes a Batch and
// returns the loss (when labels are present) and the logits, as Hugging Face models do.
// Parameter names (named_parameters()) are the checkpoint names, so keep them stable.
// Thread-safety: as torch::nn::Module.
#pragma once

#include <torch/nn/module.h>
#include <torch/types.h>

#include "tenax/sdk/data.h"

namespace tenax::sdk {

struct ModelOutput {
  torch::Tensor loss;  ///< scalar; undefined when the batch has no labels
  torch::Tensor logits;
};

class Model : public torch::nn::Module {
 public:
  virtual ModelOutput forward(const Batch& batch) = 0;
};

}  // namespace tenax::sdk
