#include "models/distilbert/distilbert_layers.h"

#include <cmath>
#include <limits>
#include <string>

#include <ATen/ATen.h>
#include <torch/nn/functional/activation.h>

#include "models/linear.h"
#include "tenax/sdk/activation_checkpoint.h"

namespace tenax::sdk::detail {
namespace {

// transformers hard-codes this epsilon in DistilBERT (the config has no layer_norm_eps).
constexpr double kLayerNormEps = 1e-12;

torch::nn::LayerNorm make_layer_norm(std::int64_t dim) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim}).eps(kLayerNormEps));
}

double lowest(torch::ScalarType dtype) {
  return dtype == torch::kFloat64    ? std::numeric_limits<double>::lowest()
         : dtype == torch::kFloat16  ? -65504.0
         : dtype == torch::kBFloat16 ? -3.3895313892515355e38
                                     : double(std::numeric_limits<float>::lowest());
}

}  // namespace

DistilBertEmbeddings::DistilBertEmbeddings(const DistilBertConfig& config) {
  word_embeddings_ =
      register_module("word_embeddings",
                      torch::nn::Embedding(
                          torch::nn::EmbeddingOptions(config.vocab_size, config.dim).padding_idx(config.pad_token_id)));
  position_embeddings_ =
      register_module("position_embeddings", torch::nn::Embedding(config.max_position_embeddings, config.dim));
  layer_norm_ = register_module("LayerNorm", make_layer_norm(config.dim));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
}

torch::Tensor DistilBertEmbeddings::forward(const torch::Tensor& input_ids) {
  const auto position_ids =
      torch::arange(input_ids.size(1), torch::TensorOptions().dtype(torch::kInt64).device(input_ids.device()))
          .unsqueeze(0);
  const auto embeddings = word_embeddings_(input_ids) + position_embeddings_(position_ids);
  return dropout_(layer_norm_(embeddings));
}

DistilBertSelfAttention::DistilBertSelfAttention(const DistilBertConfig& config)
    : heads_(config.n_heads), head_dim_(config.dim / config.n_heads), dropout_p_(config.attention_dropout) {
  q_lin_ = register_module("q_lin", torch::nn::Linear(config.dim, config.dim));
  k_lin_ = register_module("k_lin", torch::nn::Linear(config.dim, config.dim));
  v_lin_ = register_module("v_lin", torch::nn::Linear(config.dim, config.dim));
  out_lin_ = register_module("out_lin", torch::nn::Linear(config.dim, config.dim));
}

torch::Tensor DistilBertSelfAttention::forward(const torch::Tensor& hidden, const torch::Tensor& key_padding) {
  const auto batch = hidden.size(0);
  const auto seq = hidden.size(1);
  auto shape = [&](const torch::Tensor& x) { return x.view({batch, -1, heads_, head_dim_}).transpose(1, 2); };
  // transformers' eager order: scale q first, then matmul; padded keys get finfo.min (not -inf,
  // so a fully padded row stays finite).
  const auto q = shape(linear(q_lin_, hidden)) / std::sqrt(static_cast<double>(head_dim_));
  const auto k = shape(linear(k_lin_, hidden));
  const auto v = shape(linear(v_lin_, hidden));
  auto scores = at::matmul(q, k.transpose(2, 3));
  if (key_padding.defined()) {
    scores = scores.masked_fill(key_padding.view({batch, 1, 1, seq}).expand_as(scores), lowest(scores.scalar_type()));
  }
  auto weights = at::softmax(scores, -1);
  if (is_training() && dropout_p_ > 0.0) weights = at::dropout(weights, dropout_p_, /*train=*/true);
  const auto context = at::matmul(weights, v).transpose(1, 2).contiguous().view({batch, -1, heads_ * head_dim_});
  return linear(out_lin_, context);
}

DistilBertFeedForward::DistilBertFeedForward(const DistilBertConfig& config) : activation_(config.activation) {
  lin1_ = register_module("lin1", torch::nn::Linear(config.dim, config.hidden_dim));
  lin2_ = register_module("lin2", torch::nn::Linear(config.hidden_dim, config.dim));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.dropout));
}

torch::Tensor DistilBertFeedForward::forward(const torch::Tensor& hidden) {
  auto x = linear(lin1_, hidden);
  x = activation_ == DistilBertActivation::kRelu ? torch::relu(x) : torch::gelu(x);  // exact erf GELU
  return dropout_(linear(lin2_, x));
}

DistilBertBlock::DistilBertBlock(const DistilBertConfig& config) {
  attention_ = register_module("attention", std::make_shared<DistilBertSelfAttention>(config));
  sa_layer_norm_ = register_module("sa_layer_norm", make_layer_norm(config.dim));
  ffn_ = register_module("ffn", std::make_shared<DistilBertFeedForward>(config));
  output_layer_norm_ = register_module("output_layer_norm", make_layer_norm(config.dim));
}

torch::Tensor DistilBertBlock::forward(const torch::Tensor& hidden, const torch::Tensor& key_padding) {
  const auto sa_output = sa_layer_norm_(attention_->forward(hidden, key_padding) + hidden);
  return output_layer_norm_(ffn_->forward(sa_output) + sa_output);
}

DistilBertTransformer::DistilBertTransformer(const DistilBertConfig& config) {
  layers_ = register_module("layer", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < config.n_layers; ++i) layers_->push_back(std::make_shared<DistilBertBlock>(config));
}

std::vector<torch::Tensor> DistilBertTransformer::forward(torch::Tensor hidden, const torch::Tensor& key_padding) {
  std::vector<torch::Tensor> states{hidden};
  for (const auto& module : *layers_) {
    auto layer = std::dynamic_pointer_cast<DistilBertBlock>(module);
    hidden = gradient_checkpointing && is_training()
                 ? checkpoint_activations(
                       [layer](const std::vector<torch::Tensor>& in) { return layer->forward(in[0], in[1]); },
                       {hidden, key_padding})
                 : layer->forward(hidden, key_padding);
    states.push_back(hidden);
  }
  return states;
}

void fill_sinusoidal_embeddings(torch::Tensor& weight) {
  const auto n_pos = weight.size(0);
  const auto dim = weight.size(1);
  const auto options = torch::TensorOptions().dtype(torch::kFloat64);
  const auto pos = torch::arange(n_pos, options).unsqueeze(1);
  // np.power(10000, 2 * (j // 2) / dim), element by element as numpy evaluates it.
  const auto j = torch::arange(dim, torch::TensorOptions().dtype(torch::kInt64));
  const auto exponent = (2 * j.div(2, "floor")).to(torch::kFloat64) / static_cast<double>(dim);
  const auto angle = pos / torch::pow(10000.0, exponent).unsqueeze(0);
  using torch::indexing::Slice;
  torch::NoGradGuard no_grad;
  weight.index_put_({Slice(), Slice(0, torch::indexing::None, 2)},
                    torch::sin(angle.index({Slice(), Slice(0, torch::indexing::None, 2)})).to(torch::kFloat32));
  weight.index_put_({Slice(), Slice(1, torch::indexing::None, 2)},
                    torch::cos(angle.index({Slice(), Slice(1, torch::indexing::None, 2)})).to(torch::kFloat32));
}

}  // namespace tenax::sdk::detail
