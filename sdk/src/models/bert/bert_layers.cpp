#include "models/bert/bert_layers.h"

#include <string>

#include <torch/nn/functional/activation.h>

#include "models/attention.h"
#include "models/linear.h"
#include "tenax/sdk/activation_checkpoint.h"

namespace tenax::sdk::detail {
namespace {

torch::nn::LayerNorm make_layer_norm(const BertConfig& config) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size}).eps(config.layer_norm_eps));
}

}  // namespace

BertEmbeddings::BertEmbeddings(const BertConfig& config) {
  // padding_idx also keeps the gradient of the pad row at zero, as nn.Embedding does in Python.
  word_embeddings_ = register_module(
      "word_embeddings",
      torch::nn::Embedding(
          torch::nn::EmbeddingOptions(config.vocab_size, config.hidden_size).padding_idx(config.pad_token_id)));
  position_embeddings_ =
      register_module("position_embeddings", torch::nn::Embedding(config.max_position_embeddings, config.hidden_size));
  token_type_embeddings_ =
      register_module("token_type_embeddings", torch::nn::Embedding(config.type_vocab_size, config.hidden_size));
  layer_norm_ = register_module("LayerNorm", make_layer_norm(config));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.hidden_dropout_prob));
}

torch::Tensor BertEmbeddings::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids) {
  const auto position_ids =
      torch::arange(input_ids.size(1), torch::TensorOptions().dtype(torch::kInt64).device(input_ids.device()))
          .unsqueeze(0);
  // transformers' order of additions: (word + token_type) + position.
  auto embeddings = word_embeddings_(input_ids) + token_type_embeddings_(token_type_ids);
  embeddings = embeddings + position_embeddings_(position_ids);
  return dropout_(layer_norm_(embeddings));
}

BertSelfAttention::BertSelfAttention(const BertConfig& config)
    : heads_(config.num_attention_heads),
      head_dim_(config.hidden_size / config.num_attention_heads),
      dropout_p_(config.attention_probs_dropout_prob) {
  query_ = register_module("query", torch::nn::Linear(config.hidden_size, config.hidden_size));
  key_ = register_module("key", torch::nn::Linear(config.hidden_size, config.hidden_size));
  value_ = register_module("value", torch::nn::Linear(config.hidden_size, config.hidden_size));
}

torch::Tensor BertSelfAttention::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask) {
  const auto batch = hidden.size(0);
  const auto seq = hidden.size(1);
  auto split_heads = [&](const torch::Tensor& x) {
    return x.view({batch, seq, heads_, head_dim_}).permute({0, 2, 1, 3});
  };
  auto context =
      scaled_dot_product_attention(split_heads(linear(query_, hidden)), split_heads(linear(key_, hidden)),
                                   split_heads(linear(value_, hidden)), additive_mask, dropout_p_, is_training());
  return context.permute({0, 2, 1, 3}).contiguous().view({batch, seq, heads_ * head_dim_});
}

BertResidualOutput::BertResidualOutput(const BertConfig& config, std::int64_t in_features) {
  dense_ = register_module("dense", torch::nn::Linear(in_features, config.hidden_size));
  layer_norm_ = register_module("LayerNorm", make_layer_norm(config));
  dropout_ = register_module("dropout", torch::nn::Dropout(config.hidden_dropout_prob));
}

torch::Tensor BertResidualOutput::forward(const torch::Tensor& hidden, const torch::Tensor& residual) {
  return layer_norm_(dropout_(linear(dense_, hidden)) + residual);
}

BertAttention::BertAttention(const BertConfig& config) {
  self_ = register_module("self", std::make_shared<BertSelfAttention>(config));
  output_ = register_module("output", std::make_shared<BertResidualOutput>(config, config.hidden_size));
}

torch::Tensor BertAttention::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask) {
  return output_->forward(self_->forward(hidden, additive_mask), hidden);
}

BertIntermediate::BertIntermediate(const BertConfig& config) {
  dense_ = register_module("dense", torch::nn::Linear(config.hidden_size, config.intermediate_size));
}

torch::Tensor BertIntermediate::forward(const torch::Tensor& hidden) {
  return torch::gelu(linear(dense_, hidden));  // exact erf GELU, transformers' "gelu"
}

BertLayer::BertLayer(const BertConfig& config) {
  attention_ = register_module("attention", std::make_shared<BertAttention>(config));
  intermediate_ = register_module("intermediate", std::make_shared<BertIntermediate>(config));
  output_ = register_module("output", std::make_shared<BertResidualOutput>(config, config.intermediate_size));
}

torch::Tensor BertLayer::forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask) {
  const auto attended = attention_->forward(hidden, additive_mask);
  return output_->forward(intermediate_->forward(attended), attended);
}

BertEncoder::BertEncoder(const BertConfig& config) {
  layers_ = register_module("layer", torch::nn::ModuleList());
  for (std::int64_t i = 0; i < config.num_hidden_layers; ++i) {
    layers_->push_back(std::make_shared<BertLayer>(config));
  }
}

torch::Tensor BertEncoder::forward(torch::Tensor hidden, const torch::Tensor& additive_mask) {
  for (const auto& module : *layers_) {
    auto layer = std::dynamic_pointer_cast<BertLayer>(module);
    hidden = gradient_checkpointing && is_training()
                 ? checkpoint_activations(
                       [layer](const std::vector<torch::Tensor>& in) { return layer->forward(in[0], in[1]); },
                       {hidden, additive_mask})
                 : layer->forward(hidden, additive_mask);
  }
  return hidden;
}

BertPooler::BertPooler(const BertConfig& config) {
  dense_ = register_module("dense", torch::nn::Linear(config.hidden_size, config.hidden_size));
}

torch::Tensor BertPooler::forward(const torch::Tensor& last_hidden_state) {
  return torch::tanh(linear(dense_, last_hidden_state.select(1, 0)));
}

}  // namespace tenax::sdk::detail
