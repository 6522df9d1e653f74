// Which parameters get weight decay, as transformers' Trainer decides it, and AdamW's two
// parameter groups built from that (Trainer.create_optimizer): every parameter decays except
// biases (names containing "bias") and the parameters of LayerNorm modules, found by module
// type (torch::nn::LayerNormImpl or a subclass), not by name. A model with its own layer-norm
// class gets weight decay on it, as in transformers.
// Thread-safety: reads the module; do not change its structure meanwhile.
//
//   torch::optim::AdamW optimizer(adamw_param_groups(*model, AdamWOptions(lr).weight_decay(0.01)),
//                                 AdamWOptions(lr));
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

namespace tenax::sdk {

/// The names (as named_parameters() gives them) of the parameters that get weight decay:
/// transformers' Trainer.get_decay_parameter_names, in named_parameters() order. Frozen
/// parameters are listed too, as there.
std::vector<std::string> decay_parameter_names(const torch::nn::Module& model);

/// AdamW's parameter groups as transformers' Trainer.create_optimizer builds them, always two
/// and in this order (either may be empty): [0] the trainable parameters of
/// decay_parameter_names with `options` (its weight_decay), [1] the other trainable parameters
/// with `options` and weight_decay 0. Each group lists its parameters in named_parameters() order.
std::vector<torch::optim::OptimizerParamGroup> adamw_param_groups(const torch::nn::Module& model,
                                                                  const torch::optim::AdamWOptions& options);

}  // namespace tenax::sdk
