#include "tenax/sdk/models/bert.h"

#include <string>

#include <torch/nn/init.h>

#include "models/attention.h"
#include "models/linear.h"
#include "models/bert/bert_layers.h"
#include "models/classification_loss.h"
#include "models/init_weights.h"
#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

std::string shape_string(const torch::Tensor& t) {
  std::string s = "[";
  for (std::int64_t d = 0; d < t.dim(); ++d) s += (d ? ", " : "") + std::to_string(t.size(d));
  return s + "]";
}

void check_same_shape(const torch::Tensor& ids, const torch::Tensor& other, const char* name) {
  if (other.defined() && other.sizes() != ids.sizes()) {
    throw ConfigError(std::string("BERT forward: ") + name + " has shape " + shape_string(other) + ", input_ids " +
                      shape_string(ids));
  }
}

}  // namespace

BertModel::BertModel(const BertConfig& config) : config_(config) {
  config_.validate("BertConfig");
  embeddings_ = register_module("embeddings", std::make_shared<detail::BertEmbeddings>(config_));
  encoder_ = register_module("encoder", std::make_shared<detail::BertEncoder>(config_));
  pooler_ = register_module("pooler", std::make_shared<detail::BertPooler>(config_));
  detail::init_weights(*this, config_.initializer_range);
}

BertModel::~BertModel() = default;

void BertModel::set_gradient_checkpointing(bool on) { encoder_->gradient_checkpointing = on; }

BertOutput BertModel::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                              const torch::Tensor& token_type_ids) {
  if (!input_ids.defined() || input_ids.dim() != 2) {
    throw ConfigError("BERT forward: input_ids must be a [batch, seq] tensor");
  }
  if (input_ids.size(1) > config_.max_position_embeddings) {
    throw ConfigError("BERT forward: sequence length " + std::to_string(input_ids.size(1)) +
                      " exceeds max_position_embeddings " + std::to_string(config_.max_position_embeddings) +
                      "; truncate the inputs");
  }
  check_same_shape(input_ids, attention_mask, "attention_mask");
  check_same_shape(input_ids, token_type_ids, "token_type_ids");
  const auto types = token_type_ids.defined() ? token_type_ids : torch::zeros_like(input_ids);
  const auto mask = attention_mask.defined() ? attention_mask : torch::ones_like(input_ids);

  auto hidden = embeddings_->forward(input_ids, types);
  const auto additive_mask = detail::additive_attention_mask(mask, hidden.scalar_type());
  hidden = encoder_->forward(hidden, additive_mask);
  return BertOutput{hidden, pooler_->forward(hidden)};
}

BertForSequenceClassification::BertForSequenceClassification(BertConfig config) : config_(std::move(config)) {
  config_.validate("BertConfig");
  bert_ = register_module("bert", std::make_shared<BertModel>(config_));
  dropout_ = register_module("dropout", torch::nn::Dropout(config_.effective_classifier_dropout()));
  classifier_ = register_module("classifier", torch::nn::Linear(config_.hidden_size, config_.num_labels()));
  torch::NoGradGuard no_grad;
  // nn::init::normal_ rather than Tensor::normal_: the latter's inline optional<Generator>
  // default trips GCC 12's -Wmaybe-uninitialized in the -O1 sanitizer build.
  torch::nn::init::normal_(classifier_->weight, 0.0, config_.initializer_range);
  classifier_->bias.zero_();
}

ModelOutput BertForSequenceClassification::forward(const Batch& batch) {
  return forward(batch.input_ids, batch.attention_mask, batch.token_type_ids, batch.labels);
}

ModelOutput BertForSequenceClassification::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                   const torch::Tensor& token_type_ids, const torch::Tensor& labels) {
  const BertOutput encoded = bert_->forward(input_ids, attention_mask, token_type_ids);
  ModelOutput out;
  out.logits = detail::linear(classifier_, dropout_(encoded.pooler_output));
  if (labels.defined()) out.loss = detail::classification_loss(config_, out.logits, labels);
  return out;
}

std::shared_ptr<BertForSequenceClassification> BertForSequenceClassification::from_pretrained(
    const std::filesystem::path& dir, const PretrainedOptions& options) {
  return load<BertForSequenceClassification>(dir, options);
}

const PretrainedModelInfo& BertForSequenceClassification::info() const {
  static const PretrainedModelInfo kInfo{
      "BertForSequenceClassification", "bert", {"embeddings.position_ids", "embeddings.token_type_ids"}};
  return kInfo;
}

std::string BertForSequenceClassification::config_json() const { return config_.to_json_string(); }

}  // namespace tenax::sdk
