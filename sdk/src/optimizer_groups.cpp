#include "tenax/sdk/optimizer_groups.h"

#include <memory>
#include <unordered_set>

#include <torch/nn/modules/normalization.h>

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

std::vector<torch::optim::OptimizerParamGroup> adamw_param_groups(const torch::nn::Module& model,
                                                                  const torch::optim::AdamWOptions& options) {
  const std::vector<std::string> names = decay_parameter_names(model);
  const std::unordered_set<std::string> decays(names.begin(), names.end());
  std::vector<torch::Tensor> decay, no_decay;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (!item.value().requires_grad()) continue;
    (decays.count(item.key()) != 0 ? decay : no_decay).push_back(item.value());
  }
  auto no_decay_options = std::make_unique<torch::optim::AdamWOptions>(options);
  no_decay_options->weight_decay(0.0);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::move(decay), std::make_unique<torch::optim::AdamWOptions>(options));
  groups.emplace_back(std::move(no_decay), std::move(no_decay_options));
  return groups;
}

}  // namespace tenax::sdk
