// The building blocks of DistilBertModel, named as transformers names them so that the
// parameter paths come out as "embeddings.word_embeddings.weight",
// "transformer.layer.0.attention.q_lin.weight", "transformer.layer.0.ffn.lin1.bias",
// "transformer.layer.0.output_layer_norm.weight", ... Private to sdk/.
// Thread-safety: as torch::nn::Module.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "tenax/sdk/models/distilbert_config.h"

namespace tenax::sdk::detail {

/// word + absolute position embeddings (no token types), then LayerNorm (eps 1e-12) and dropout.
class DistilBertEmbeddings : public torch::nn::Module {
 public:
  explicit DistilBertEmbeddings(const DistilBertConfig& config);
  torch::Tensor forward(const torch::Tensor& input_ids);
  /// The position embedding table (for sinusoidal initialisation).
  torch::nn::Embedding& position_embeddings() { return position_embeddings_; }

 private:
  torch::nn::Embedding word_embeddings_{nullptr};
  torch::nn::Embedding position_embeddings_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

/// "attention": q_lin, k_lin, v_lin, out_lin, in transformers' eager op order (q scaled before
/// the matmul, padded keys filled with finfo.min).
class DistilBertSelfAttention : public torch::nn::Module {
 public:
  explicit DistilBertSelfAttention(const DistilBertConfig& config);
  /// `key_padding` [batch, seq] bool, true at padded positions (or undefined: none).
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& key_padding);

 private:
  std::int64_t heads_;
  std::int64_t head_dim_;
  double dropout_p_;
  torch::nn::Linear q_lin_{nullptr};
  torch::nn::Linear k_lin_{nullptr};
  torch::nn::Linear v_lin_{nullptr};
  torch::nn::Linear out_lin_{nullptr};
};

/// "ffn": lin1, activation, lin2, dropout.
class DistilBertFeedForward : public torch::nn::Module {
 public:
  explicit DistilBertFeedForward(const DistilBertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  DistilBertActivation activation_;
  torch::nn::Linear lin1_{nullptr};
  torch::nn::Linear lin2_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

/// One block: attention, sa_layer_norm(+residual), ffn, output_layer_norm(+residual).
class DistilBertBlock : public torch::nn::Module {
 public:
  explicit DistilBertBlock(const DistilBertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& key_padding);

 private:
  std::shared_ptr<DistilBertSelfAttention> attention_;
  torch::nn::LayerNorm sa_layer_norm_{nullptr};
  std::shared_ptr<DistilBertFeedForward> ffn_;
  torch::nn::LayerNorm output_layer_norm_{nullptr};
};

/// transformer.layer.<i>, applied in order; returns every hidden state (input first).
class DistilBertTransformer : public torch::nn::Module {
 public:
  explicit DistilBertTransformer(const DistilBertConfig& config);
  std::vector<torch::Tensor> forward(torch::Tensor hidden, const torch::Tensor& key_padding);

  /// Each layer through checkpoint_activations while training (Model::set_gradient_checkpointing).
  bool gradient_checkpointing = false;

 private:
  torch::nn::ModuleList layers_{nullptr};
};

/// transformers' create_sinusoidal_embeddings: row p, column j holds sin (even j) or cos (odd j)
/// of p / 10000^(2 floor(j/2) / dim), computed in float64 as numpy does, then stored as float32.
void fill_sinusoidal_embeddings(torch::Tensor& weight);

}  // namespace tenax::sdk::detail
