// Which parameters get weight decay, as transformers' Trainer decides it, the optimizer's two
// parameter groups built from that, and the optimizer itself for TrainingArguments::optim
// (Trainer.create_optimizer): every parameter decays except
// biases (names containing "bias") and the parameters of LayerNorm modules, found by module
// type (torch::nn::LayerNormImpl or a subclass), not by name. A model with its own layer-norm
// class gets weight decay on it, as in transformers.
// Thread-safety: reads the module; do not change its structure meanwhile.
//
//   torch::optim::AdamW optimizer(decay_param_groups(*model, AdamWOptions(lr).weight_decay(0.01)),
//                                 AdamWOptions(lr));
//   auto same_as_the_trainer = create_optimizer_for(*model, args);   // args.optim decides
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "tenax/sdk/training_arguments.h"

namespace tenax::sdk {

/// The names (as named_parameters() gives them) of the parameters that get weight decay:
/// transformers' Trainer.get_decay_parameter_names, in named_parameters() order. Frozen
/// parameters are listed too, as there.
std::vector<std::string> decay_parameter_names(const torch::nn::Module& model);

/// The trainable parameters split as decay_parameter_names says: {decayed, not decayed}, each
/// in named_parameters() order.
std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> split_by_weight_decay(const torch::nn::Module& model);

/// The optimizer's parameter groups as transformers' Trainer.create_optimizer builds them, always
/// two and in this order (either may be empty): [0] the trainable parameters of
/// decay_parameter_names with `options` (its weight_decay), [1] the other trainable parameters
/// with `options` and weight_decay 0. `Options`: any libtorch optimizer's options with a
/// weight_decay (AdamWOptions, SGDOptions, AdafactorOptions). Adafactor and create_optimizer_for
/// keep each group's options; torch 2.15's own optimizers merge them into their defaults, where a
/// weight_decay equal to the options class's default (0 for SGD, Adam, Adagrad, RMSprop; AdamW's
/// is 0.01) counts as unset and takes the defaults' value.
template <typename Options>
std::vector<torch::optim::OptimizerParamGroup> decay_param_groups(const torch::nn::Module& model,
                                                                  const Options& options) {
  auto [decay, no_decay] = split_by_weight_decay(model);
  auto no_decay_options = std::make_unique<Options>(options);
  no_decay_options->weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decay), std::make_unique<Options>(options));
  groups.emplace_back(std::move(no_decay), std::move(no_decay_options));
  return groups;
}

/// The optimizer transformers' Trainer builds for `args.optim` over decay_param_groups:
///   adamw_torch, adamw_torch_fused  AdamW (adam_beta1, adam_beta2, adam_epsilon, weight_decay),
///                                   stepped by torch's fused kernel where libtorch has it
///                                   (sdk/src/fused_adamw.h);
///   sgd                             torch's SGD with learning_rate and weight_decay, no momentum;
///   adafactor                       transformers' Adafactor with scale_parameter and
///                                   relative_step off (the schedule sets the rate), weight_decay.
/// The learning rate is learning_rate; the Trainer sets each step's from the schedule.
std::unique_ptr<torch::optim::Optimizer> create_optimizer_for(const torch::nn::Module& model,
                                                              const TrainingArguments& args);

}  // namespace tenax::sdk
