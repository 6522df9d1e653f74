#include "tenax/sdk/models/distilbert.h"

#include <string>

#include <torch/nn/init.h>

#include "models/classification_loss.h"
#include "models/linear.h"
#include "models/distilbert/distilbert_layers.h"
#include "models/init_weights.h"
#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

std::string shape_string(const torch::Tensor& t) {
  std::string s = "[";
  for (std::int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

}  // namespace

DistilBertModel::DistilBertModel(const DistilBertConfig& config) : config_(config) {
  config_.validate("DistilBertConfig");
  embeddings_ = register_module("embeddings", std::make_shared<detail::DistilBertEmbeddings>(config_));
  transformer_ = register_module("transformer", std::make_shared<detail::DistilBertTransformer>(config_));
  detail::init_weights(*this, config_.initializer_range);
  if (config_.sinusoidal_pos_embds) detail::fill_sinusoidal_embeddings(embeddings_->position_embeddings()->weight);
}

DistilBertModel::~DistilBertModel() = default;

void DistilBertModel::set_gradient_checkpointing(bool on) { transformer_->gradient_checkpointing = on; }

DistilBertOutput DistilBertModel::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
  if (!input_ids.defined() || input_ids.dim() != 2) {
    throw ConfigError("DistilBERT forward: input_ids must be a [batch, seq] tensor");
  }
  if (input_ids.size(1) > config_.max_position_embeddings) {
    throw ConfigError("DistilBERT forward: sequence length " + std::to_string(input_ids.size(1)) +
                      " exceeds max_position_embeddings " + std::to_string(config_.max_position_embeddings) +
                      "; truncate the inputs");
  }
  if (attention_mask.defined() && attention_mask.sizes() != input_ids.sizes()) {
    throw ConfigError("DistilBERT forward: attention_mask has shape " + shape_string(attention_mask) + ", input_ids " +
                      shape_string(input_ids));
  }
  const auto key_padding = attention_mask.defined() ? attention_mask.eq(0) : torch::Tensor();
  DistilBertOutput out;
  out.hidden_states = transformer_->forward(embeddings_->forward(input_ids), key_padding);
  out.last_hidden_state = out.hidden_states.back();
  return out;
}

DistilBertForSequenceClassification::DistilBertForSequenceClassification(DistilBertConfig config)
    : config_(std::move(config)) {
  config_.validate("DistilBertConfig");
  distilbert_ = register_module("distilbert", std::make_shared<DistilBertModel>(config_));
  pre_classifier_ = register_module("pre_classifier", torch::nn::Linear(config_.dim, config_.dim));
  classifier_ = register_module("classifier", torch::nn::Linear(config_.dim, config_.num_labels()));
  dropout_ = register_module("dropout", torch::nn::Dropout(config_.seq_classif_dropout));
  torch::NoGradGuard no_grad;
  for (auto* linear : {pre_classifier_.get(), classifier_.get()}) {
    torch::nn::init::normal_(linear->weight, 0.0, config_.initializer_range);
    linear->bias.zero_();
  }
}

ModelOutput DistilBertForSequenceClassification::forward(const Batch& batch) {
  return forward(batch.input_ids, batch.attention_mask, batch.labels);
}

ModelOutput DistilBertForSequenceClassification::forward(const torch::Tensor& input_ids,
                                                         const torch::Tensor& attention_mask,
                                                         const torch::Tensor& labels) {
  const DistilBertOutput encoded = distilbert_->forward(input_ids, attention_mask);
  const auto pooled = dropout_(torch::relu(detail::linear(pre_classifier_, encoded.last_hidden_state.select(1, 0))));
  ModelOutput out;
  out.logits = detail::linear(classifier_, pooled);
  if (labels.defined()) out.loss = detail::classification_loss(config_, out.logits, labels);
  return out;
}

std::shared_ptr<DistilBertForSequenceClassification> DistilBertForSequenceClassification::from_pretrained(
    const std::filesystem::path& dir, const PretrainedOptions& options) {
  return load<DistilBertForSequenceClassification>(dir, options);
}

const PretrainedModelInfo& DistilBertForSequenceClassification::info() const {
  static const PretrainedModelInfo kInfo{
      "DistilBertForSequenceClassification", "distilbert", {"embeddings.position_ids"}};
  return kInfo;
}

std::string DistilBertForSequenceClassification::config_json() const { return config_.to_json_string(); }

}  // namespace tenax::sdk
