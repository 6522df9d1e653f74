// transformers' weight-decay exclusions (Trainer.get_decay_parameter_names) and AdamW's two
// parameter groups, on structures the golden model does not have: nesting, LayerNorms found by
// type whatever their name, parameters of the model itself, frozen parameters.
#include "tenax/sdk/optimizer_groups.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tenax::sdk {
namespace {

class Block : public torch::nn::Module {
 public:
  Block()
      : mix_(register_module("mix", torch::nn::Linear(4, 4))),
        norm_(register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})))) {}

 private:
  torch::nn::Linear mix_;
  torch::nn::LayerNorm norm_;
};

class Net : public torch::nn::Module {
 public:
  Net()
      : embed_(register_module("embed", torch::nn::Embedding(10, 4))),
        // A Linear named like a layer norm decays; a LayerNorm named "final" does not.
        layer_norm_(register_module("layer_norm", torch::nn::Linear(4, 4))),
        blocks_(register_module("blocks", torch::nn::ModuleList())),
        final_(register_module("final", torch::nn::LayerNorm(torch::nn::LayerNormOptions({4})))),
        head_(register_module("head", torch::nn::Linear(4, 2))) {
    blocks_->push_back(std::make_shared<Block>());
    blocks_->push_back(std::make_shared<Block>());
    scale_ = register_parameter("scale", torch::ones({4}));
    unbiased_ = register_parameter("unbiased_gain", torch::ones({4}));  // "bias" inside: excluded, as there
  }

 private:
  torch::nn::Embedding embed_;
  torch::nn::Linear layer_norm_;
  torch::nn::ModuleList blocks_;
  torch::nn::LayerNorm final_;
  torch::nn::Linear head_;
  torch::Tensor scale_, unbiased_;
};

TEST(SdkOptimizerGroups, DecayNamesExcludeBiasesAndLayerNormsByTypeNotByName) {
  Net net;
  // named_parameters() order: the model's own first, then its modules depth first.
  const std::vector<std::string> expected = {
      "scale", "embed.weight", "layer_norm.weight", "blocks.0.mix.weight", "blocks.1.mix.weight", "head.weight"};
  EXPECT_EQ(decay_parameter_names(net), expected);
}

TEST(SdkOptimizerGroups, TwoGroupsInFixedOrderWithTrainableParametersOnly) {
  auto net = std::make_shared<Net>();
  net->named_parameters()["embed.weight"].set_requires_grad(false);  // frozen: in no group
  torch::optim::AdamWOptions options(1e-3);
  options.weight_decay(0.05).betas({0.8, 0.9});
  const auto groups = decay_param_groups(*net, options);
  ASSERT_EQ(groups.size(), 2u);
  const auto& decay = static_cast<const torch::optim::AdamWOptions&>(groups[0].options());
  const auto& no_decay = static_cast<const torch::optim::AdamWOptions&>(groups[1].options());
  EXPECT_EQ(decay.weight_decay(), 0.05);
  EXPECT_EQ(no_decay.weight_decay(), 0.0);
  EXPECT_EQ(std::get<0>(no_decay.betas()), 0.8);  // everything else is the caller's
  EXPECT_EQ(no_decay.lr(), 1e-3);

  auto params = net->named_parameters();
  auto same = [](const std::vector<torch::Tensor>& got, const std::vector<torch::Tensor>& want) {
    if (got.size() != want.size()) return false;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!got[i].is_same(want[i])) return false;
    }
    return true;
  };
  EXPECT_TRUE(same(groups[0].params(), {params["scale"], params["layer_norm.weight"], params["blocks.0.mix.weight"],
                                        params["blocks.1.mix.weight"], params["head.weight"]}));
  EXPECT_TRUE(same(
      groups[1].params(),
      {params["unbiased_gain"], params["layer_norm.bias"], params["blocks.0.mix.bias"], params["blocks.0.norm.weight"],
       params["blocks.0.norm.bias"], params["blocks.1.mix.bias"], params["blocks.1.norm.weight"],
       params["blocks.1.norm.bias"], params["final.weight"], params["final.bias"], params["head.bias"]}));

  torch::optim::AdamW optimizer(groups, options);  // libtorch accepts them as they are
  EXPECT_EQ(optimizer.param_groups().size(), 2u);
}

}  // namespace
}  // namespace tenax::sdk
