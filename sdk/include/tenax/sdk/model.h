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
  /// Whether set_gradient_checkpointing recomputes this model's layers (transformers'
  /// supports_gradient_checkpointing): BERT, DistilBERT and ViT do; a model of one's own can,
  /// with checkpoint_activations (tenax/sdk/activation_checkpoint.h).
  virtual bool supports_gradient_checkpointing() const { return false; }
  /// transformers' gradient_checkpointing_enable / _disable: in training, each layer keeps only
  /// its inputs and runs again during backward. TrainingArguments::gradient_checkpointing calls
  /// it; the Trainer refuses that argument for a model that does not support it.
  virtual void set_gradient_checkpointing(bool on) { (void)on; }
};

}  // namespace tenax::sdk
