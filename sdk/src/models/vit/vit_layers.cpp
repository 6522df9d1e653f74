#include "models/vit/vit_layers.h"

#include <cmath>
#include <string>

#include <torch/nn/functional/upsampling.h>
#include <torch/nn/init.h>

#include "models/attention.h"
#include "models/linear.h"
#include "tenax/sdk/activation_checkpoint.h"
#include "tenax/core/error.h"

namespace tenax::sdk::detail {
namespace {

torch::nn::LayerNorm make_layer_norm(const ViTConfig& config) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size}).eps(config.layer_norm_eps));
}

// transformers' trunc_normal_(mean 0, std, a=-2, b=2): the bounds are absolute, 2 / std standard
// deviations out (100 for the default 0.02), so a normal draw clamped to them has the same law
// to within what a float can tell.
void trunc_normal(torch::Tensor& t, double std) {
  torch::nn::init::normal_(t, 0.0, std);
  t.clamp_(-2.0, 2.0);
}

}  // namespace

ViTDense::ViTDense(std::int64_t in, std::int64_t out, double dropout) {
  dense_ = register_module("dense", torch::nn::Linear(in, out));
  dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
}

torch::Tensor ViTDense::forward(const torch::Tensor& x) { return dropout_(linear(dense_, x)); }

ViTPatchEmbeddings::ViTPatchEmbeddings(const ViTConfig& config) {
  projection_ = register_module(
      "projection",
      torch::nn::Conv2d(torch::nn::Conv2dOptions(config.num_channels, config.hidden_size, config.patch_size)
                            .stride(config.patch_size)));
}

torch::Tensor ViTPatchEmbeddings::forward(const torch::Tensor& pixel_values) {
  return projection_(pixel_values).flatten(2).transpose(1, 2);
}

ViTEmbeddings::ViTEmbeddings(const ViTConfig& config) : config_(config) {
  const std::int64_t patches = config.patches_per_side() * config.patches_per_side();
  cls_token = register_parameter("cls_token", torch::randn({1, 1, config.hidden_size}));
  position_embeddings = register_parameter("position_embeddings", torch::randn({1, patches + 1, config.hidden_size}));
  patch_embeddings_ = register_module("patch_embeddings", std::make_shared<ViTPatchEmbeddings>(config));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.hidden_dropout_prob));
}

torch::Tensor ViTEmbeddings::interpolate_pos_encoding(std::int64_t num_patches, std::int64_t height,
                                                      std::int64_t width) {
  const std::int64_t num_positions = position_embeddings.size(1) - 1;
  if (num_patches == num_positions && height == width) return position_embeddings;
  namespace F = torch::nn::functional;
  using torch::indexing::Slice;
  const auto class_pos = position_embeddings.index({Slice(), 0});
  auto patch_pos = position_embeddings.index({Slice(), Slice(1, torch::indexing::None)});
  const std::int64_t dim = position_embeddings.size(2);
  const auto side = static_cast<std::int64_t>(std::sqrt(static_cast<double>(num_positions)));
  // transformers (after DINO) adds 0.1 so that floor(side * scale) lands on the wanted count.
  const double h0 = static_cast<double>(height / config_.patch_size) + 0.1;
  const double w0 = static_cast<double>(width / config_.patch_size) + 0.1;
  const double root = std::sqrt(static_cast<double>(num_positions));
  patch_pos = patch_pos.reshape({1, side, side, dim}).permute({0, 3, 1, 2});
  patch_pos = F::interpolate(patch_pos, F::InterpolateFuncOptions()
                                            .scale_factor(std::vector<double>{h0 / root, w0 / root})
                                            .mode(torch::kBicubic)
                                            .align_corners(false));
  if (patch_pos.size(-2) != static_cast<std::int64_t>(h0) || patch_pos.size(-1) != static_cast<std::int64_t>(w0)) {
    throw ConfigError("ViT: interpolating the position table to " + std::to_string(height) + "x" +
                      std::to_string(width) + " pixels gave a " + std::to_string(patch_pos.size(-2)) + "x" +
                      std::to_string(patch_pos.size(-1)) + " grid");
  }
  patch_pos = patch_pos.permute({0, 2, 3, 1}).reshape({1, -1, dim});
  return torch::cat({class_pos.unsqueeze(0), patch_pos}, 1);
}

torch::Tensor ViTEmbeddings::forward(const torch::Tensor& pixel_values, PositionEncoding positions) {
  const auto batch = pixel_values.size(0);
  auto embeddings = patch_embeddings_->forward(pixel_values);
  embeddings = torch::cat({cls_token.expand({batch, -1, -1}), embeddings}, 1);
  if (positions == PositionEncoding::kInterpolate) {
    embeddings =
        embeddings + interpolate_pos_encoding(embeddings.size(1) - 1, pixel_values.size(2), pixel_values.size(3));
  } else {
    embeddings = embeddings + position_embeddings;
  }
  return dropout_(embeddings);
}

ViTSelfAttention::ViTSelfAttention(const ViTConfig& config)
    : heads_(config.num_attention_heads),
      head_dim_(config.hidden_size / config.num_attention_heads),
      dropout_p_(config.attention_probs_dropout_prob) {
  auto linear = [&](const char* name) {
    return register_module(
        name,
        torch::nn::Linear(torch::nn::LinearOptions(config.hidden_size, config.hidden_size).bias(config.qkv_bias)));
  };
  query_ = linear("query");
  key_ = linear("key");
  value_ = linear("value");
}

torch::Tensor ViTSelfAttention::forward(const torch::Tensor& hidden) {
  const auto batch = hidden.size(0);
  const auto seq = hidden.size(1);
  auto split_heads = [&](const torch::Tensor& x) {
    return x.view({batch, seq, heads_, head_dim_}).permute({0, 2, 1, 3});
  };
  // transformers' eager ViTSelfAttention: the same op order as BERT's, without a mask.
  auto context =
      scaled_dot_product_attention(split_heads(linear(query_, hidden)), split_heads(linear(key_, hidden)),
                                   split_heads(linear(value_, hidden)), torch::Tensor(), dropout_p_, is_training());
  return context.permute({0, 2, 1, 3}).contiguous().view({batch, seq, heads_ * head_dim_});
}

ViTLayer::ViTLayer(const ViTConfig& config) {
  // "attention" holds "attention" (q, k, v) and "output" (dense): transformers' ViTAttention.
  auto attention = std::make_shared<torch::nn::Module>();
  self_attention_ = attention->register_module("attention", std::make_shared<ViTSelfAttention>(config));
  attention_output_ = attention->register_module(
      "output", std::make_shared<ViTDense>(config.hidden_size, config.hidden_size, config.hidden_dropout_prob));
  register_module("attention", attention);
  intermediate_ =
      register_module("intermediate", std::make_shared<ViTDense>(config.hidden_size, config.intermediate_size, 0.0));
  output_ = register_module(
      "output", std::make_shared<ViTDense>(config.intermediate_size, config.hidden_size, config.hidden_dropout_prob));
  layernorm_before_ = register_module("layernorm_before", make_layer_norm(config));
  layernorm_after_ = register_module("layernorm_after", make_layer_norm(config));
}

torch::Tensor ViTLayer::forward(const torch::Tensor& hidden) {
  const auto attended = attention_output_->forward(self_attention_->forward(layernorm_before_(hidden))) + hidden;
  return output_->forward(torch::gelu(intermediate_->forward(layernorm_after_(attended)))) + attended;
}

ViTEncoder::ViTEncoder(const ViTConfig& config) {
  layers_ = register_module("layer", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) layers_->push_back(std::make_shared<ViTLayer>(config));
}

std::vector<torch::Tensor> ViTEncoder::forward(torch::Tensor hidden) {
  std::vector<torch::Tensor> states{hidden};
  for (const auto& module : *layers_) {
    auto layer = std::dynamic_pointer_cast<ViTLayer>(module);
    hidden = gradient_checkpointing && is_training()
                 ? checkpoint_activations(
                       [layer](const std::vector<torch::Tensor>& in) { return layer->forward(in[0]); }, {hidden})
                 : layer->forward(hidden);
    states.push_back(hidden);
  }
  return states;
}

void init_vit_weights(torch::nn::Module& module, double initializer_range) {
  torch::NoGradGuard no_grad;
  for (const auto& child : module.modules(/*include_self=*/false)) {
    if (auto* linear = child->as<torch::nn::Linear>()) {
      trunc_normal(linear->weight, initializer_range);
      if (linear->bias.defined()) linear->bias.zero_();
    } else if (auto* conv = child->as<torch::nn::Conv2d>()) {
      trunc_normal(conv->weight, initializer_range);
      if (conv->bias.defined()) conv->bias.zero_();
    } else if (auto* norm = child->as<torch::nn::LayerNorm>()) {
      norm->weight.fill_(1.0);
      norm->bias.zero_();
    } else if (auto* embeddings = child->as<ViTEmbeddings>()) {
      trunc_normal(embeddings->position_embeddings, initializer_range);
      trunc_normal(embeddings->cls_token, initializer_range);
    }
  }
}

}  // namespace tenax::sdk::detail
