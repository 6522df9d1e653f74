// The building blocks of ViTModel, named as transformers names them so that the parameter paths
// come out as "embeddings.patch_embeddings.projection.weight", "embeddings.cls_token",
// "encoder.layer.0.attention.attention.query.weight", "encoder.layer.0.layernorm_before.bias",
// ... Private to sdk/. Thread-safety: as torch::nn::Module.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "tenax/sdk/models/vit.h"

namespace tenax::sdk::detail {

/// A module holding one Linear named "dense" (and its dropout), for transformers' names
/// "attention.output.dense", "intermediate.dense", "output.dense".
class ViTDense : public torch::nn::Module {
 public:
  ViTDense(std::int64_t in, std::int64_t out, double dropout);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Linear dense_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

/// "patch_embeddings": a Conv2d "projection" with kernel = stride = patch_size.
class ViTPatchEmbeddings : public torch::nn::Module {
 public:
  explicit ViTPatchEmbeddings(const ViTConfig& config);
  /// [batch, channels, h, w] -> [batch, (h / patch) * (w / patch), hidden]
  torch::Tensor forward(const torch::Tensor& pixel_values);

 private:
  torch::nn::Conv2d projection_{nullptr};
};

/// "embeddings": cls_token, position_embeddings, patch_embeddings, dropout.
class ViTEmbeddings : public torch::nn::Module {
 public:
  explicit ViTEmbeddings(const ViTConfig& config);
  torch::Tensor forward(const torch::Tensor& pixel_values, PositionEncoding positions);

  torch::Tensor cls_token;            ///< [1, 1, hidden]
  torch::Tensor position_embeddings;  ///< [1, 1 + patches, hidden]

 private:
  /// transformers' interpolate_pos_encoding: the table for a height x width image.
  torch::Tensor interpolate_pos_encoding(std::int64_t num_patches, std::int64_t height, std::int64_t width);

  ViTConfig config_;
  std::shared_ptr<ViTPatchEmbeddings> patch_embeddings_;
  torch::nn::Dropout dropout_{nullptr};
};

/// "attention.attention": query, key, value (bias per qkv_bias), softmax(q k^T / sqrt(d)) v.
class ViTSelfAttention : public torch::nn::Module {
 public:
  explicit ViTSelfAttention(const ViTConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  std::int64_t heads_;
  std::int64_t head_dim_;
  double dropout_p_;
  torch::nn::Linear query_{nullptr};
  torch::nn::Linear key_{nullptr};
  torch::nn::Linear value_{nullptr};
};

/// One pre-norm layer: y = x + attention.output(attention.attention(layernorm_before(x))), then
/// y + output(gelu(intermediate(layernorm_after(y)))).
class ViTLayer : public torch::nn::Module {
 public:
  explicit ViTLayer(const ViTConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  std::shared_ptr<ViTSelfAttention> self_attention_;
  std::shared_ptr<ViTDense> attention_output_;
  std::shared_ptr<ViTDense> intermediate_;
  std::shared_ptr<ViTDense> output_;
  torch::nn::LayerNorm layernorm_before_{nullptr};
  torch::nn::LayerNorm layernorm_after_{nullptr};
};

/// encoder.layer.<i>, applied in order; returns every hidden state (input first).
class ViTEncoder : public torch::nn::Module {
 public:
  explicit ViTEncoder(const ViTConfig& config);
  std::vector<torch::Tensor> forward(torch::Tensor hidden);

  /// Each layer through checkpoint_activations while training (Model::set_gradient_checkpointing).
  bool gradient_checkpointing = false;

 private:
  torch::nn::ModuleList layers_{nullptr};
};

/// transformers' ViT _init_weights over `module`'s submodules: Linear and Conv2d weights and
/// the embeddings' position table and [CLS] ~ normal(0, initializer_range) truncated to
/// [-2, 2], biases zero, LayerNorm 1/0.
void init_vit_weights(torch::nn::Module& module, double initializer_range);

}  // namespace tenax::sdk::detail
