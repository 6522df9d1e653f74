#include "tenax/sdk/optimizer_groups.h"

#include <memory>
#include <string>
#include <unordered_set>

#include <torch/nn/modules/normalization.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "tenax/core/error.h"
#include "tenax/sdk/adafactor.h"
#include "fused_adamw.h"
#include "torch_compat.h"

namespace tenax::sdk {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::vector<std::string> decay_parameter_names(const torch::nn::Module& model) {
  // transformers' get_parameter_names skips everything below a LayerNorm child; the model
  // itself is never tested (its own parameters always count), hence include_self = false.
  std::vector<std::string> layer_norms;
  for (const auto& item : model.named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    if (dynamic_cast<const torch::nn::LayerNormImpl*>(item.value().get()) != nullptr) {
      layer_norms.push_back(item.key() + ".");
    }
  }
  std::vector<std::string> out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    if (name.find("bias") != std::string::npos) continue;
    bool in_layer_norm = false;
    for (const std::string& prefix : layer_norms) in_layer_norm = in_layer_norm || starts_with(name, prefix);
    if (!in_layer_norm) out.push_back(name);
  }
  return out;
}

std::pair<std::vector<torch::Tensor>, std::vector<torch::Tensor>> split_by_weight_decay(
    const torch::nn::Module& model) {
  const std::vector<std::string> names = decay_parameter_names(model);
  const std::unordered_set<std::string> decays(names.begin(), names.end());
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    (decays.count(item.key()) != 0 ? decay : no_decay).push_back(item.value());
  }
  return {std::move(decay), std::move(no_decay)};
}

std::unique_ptr<torch::optim::Optimizer> create_optimizer_for(const torch::nn::Module& model,
                                                              const TrainingArguments& args) {
  switch (args.optim.value()) {
    case OptimizerName::kAdamWTorch:
    case OptimizerName::kAdamWTorchFused: {
      torch::optim::AdamWOptions options(args.learning_rate);
      options.betas({args.adam_beta1, args.adam_beta2}).eps(args.adam_epsilon).weight_decay(args.weight_decay);
      return compat::make_optimizer<detail::FusedAdamW>(decay_param_groups(model, options), options);
    }
    case OptimizerName::kSgd: {
      torch::optim::SGDOptions options(args.learning_rate);
      options.weight_decay(args.weight_decay);
      return compat::make_optimizer<torch::optim::SGD>(decay_param_groups(model, options), options);
    }
    case OptimizerName::kAdafactor: {
      // transformers' Trainer: Adafactor(scale_parameter=False, relative_step=False, lr=learning_rate).
      AdafactorOptions options(args.learning_rate);
      options.scale_parameter(false).relative_step(false).weight_decay(args.weight_decay);
      return std::make_unique<Adafactor>(decay_param_groups(model, options), options);
    }
  }
  throw ConfigError("TrainingArguments.optim: '" + args.optim.name() + "' is not one of " + args.optim.accepted());
}

}  // namespace tenax::sdk
