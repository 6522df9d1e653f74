// The building blocks of BertModel, named as transformers names them so that the parameter
// paths come out as "embeddings.word_embeddings.weight",
// "encoder.layer.0.attention.self.query.weight", "encoder.layer.0.output.LayerNorm.bias",
// "pooler.dense.weight", ... Private to sdk/. Thread-safety: as torch::nn::Module.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "tenax/sdk/models/bert_config.h"

namespace tenax::sdk::detail {

/// word + token_type + absolute position embeddings, then LayerNorm and dropout.
class BertEmbeddings : public torch::nn::Module {
 public:
  explicit BertEmbeddings(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids);

 private:
  torch::nn::Embedding word_embeddings_{nullptr};
  torch::nn::Embedding position_embeddings_{nullptr};
  torch::nn::Embedding token_type_embeddings_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

/// Multi-head self-attention projections ("attention.self": query, key, value).
class BertSelfAttention : public torch::nn::Module {
 public:
  explicit BertSelfAttention(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask);

 private:
  std::int64_t heads_;
  std::int64_t head_dim_;
  double dropout_p_;
  torch::nn::Linear query_{nullptr};
  torch::nn::Linear key_{nullptr};
  torch::nn::Linear value_{nullptr};
};

/// dense, dropout, then post-LayerNorm of (output + residual): transformers' BertSelfOutput
/// (hidden -> hidden) and BertOutput (intermediate -> hidden).
class BertResidualOutput : public torch::nn::Module {
 public:
  BertResidualOutput(const BertConfig& config, std::int64_t in_features);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& residual);

 private:
  torch::nn::Linear dense_{nullptr};
  torch::nn::LayerNorm layer_norm_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

/// "attention": self-attention ("self") and its residual output ("output").
class BertAttention : public torch::nn::Module {
 public:
  explicit BertAttention(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask);

 private:
  std::shared_ptr<BertSelfAttention> self_;
  std::shared_ptr<BertResidualOutput> output_;
};

/// "intermediate": dense to intermediate_size, then exact (erf) GELU.
class BertIntermediate : public torch::nn::Module {
 public:
  explicit BertIntermediate(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden);

 private:
  torch::nn::Linear dense_{nullptr};
};

/// One encoder layer: attention, intermediate, output (post-LayerNorm).
class BertLayer : public torch::nn::Module {
 public:
  explicit BertLayer(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& additive_mask);

 private:
  std::shared_ptr<BertAttention> attention_;
  std::shared_ptr<BertIntermediate> intermediate_;
  std::shared_ptr<BertResidualOutput> output_;
};

/// encoder.layer.<i>, applied in order.
class BertEncoder : public torch::nn::Module {
 public:
  explicit BertEncoder(const BertConfig& config);
  torch::Tensor forward(torch::Tensor hidden, const torch::Tensor& additive_mask);

  /// Each layer through checkpoint_activations while training (Model::set_gradient_checkpointing).
  bool gradient_checkpointing = false;

 private:
  torch::nn::ModuleList layers_{nullptr};
};

/// tanh(dense(hidden state of the first token)).
class BertPooler : public torch::nn::Module {
 public:
  explicit BertPooler(const BertConfig& config);
  torch::Tensor forward(const torch::Tensor& last_hidden_state);

 private:
  torch::nn::Linear dense_{nullptr};
};

}  // namespace tenax::sdk::detail
