// DistilBERT with a sequence-classification head, computing what Hugging Face transformers'
// DistilBertModel / DistilBertForSequenceClassification compute (eager attention; fp32, eval
// mode: hidden states and logits within 1e-4 of transformers on the same weights,
// tests/sdk/models/distilbert_*_test.cpp).
//
// Parameter names are transformers' state-dict names ("distilbert.embeddings.word_embeddings.weight",
// "distilbert.transformer.layer.0.attention.q_lin.weight", ..., "pre_classifier.weight",
// "classifier.weight"); from_pretrained / save_pretrained come from the PretrainedModel seam.
// Thread-safety: as torch::nn::Module (one thread trains a model at a time).
//
//   auto model = DistilBertForSequenceClassification::from_pretrained(
//       "models/distilbert", PretrainedOptions().num_labels(2));
//   ModelOutput out = model->forward(batch);          // batch.input_ids, attention_mask, labels
//   model->save_pretrained("runs/x/model");
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "tenax/sdk/models/distilbert_config.h"
#include "tenax/sdk/models/pretrained_model.h"

namespace tenax::sdk {

namespace detail {
class DistilBertEmbeddings;
class DistilBertTransformer;
}  // namespace detail

/// The encoder's outputs.
struct DistilBertOutput {
  torch::Tensor last_hidden_state;  ///< [batch, seq, dim]
  /// transformers' output_hidden_states: the embeddings' output, then each layer's (n_layers + 1).
  std::vector<torch::Tensor> hidden_states;
};

/// transformers' DistilBertModel. Parameters: embeddings.*, transformer.layer.<i>.*.
class DistilBertModel : public torch::nn::Module {
 public:
  /// Builds the layers and initialises every weight as transformers' _init_weights does
  /// (normal(0, initializer_range), zero biases, LayerNorm 1/0, padding row zero; sin/cos
  /// position embeddings when sinusoidal_pos_embds), drawing from the default CPU generator.
  /// Throws ConfigError when `config` does not validate.
  explicit DistilBertModel(const DistilBertConfig& config);
  ~DistilBertModel() override;

  /// input_ids [batch, seq] int64; attention_mask [batch, seq] (1 = token, 0 = padding;
  /// undefined = all ones). Throws ConfigError when seq exceeds max_position_embeddings or the
  /// shapes disagree.
  DistilBertOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {});
  /// Each encoder layer recomputed in backward while training (checkpoint_activations).
  void set_gradient_checkpointing(bool on);

 private:
  DistilBertConfig config_;
  std::shared_ptr<detail::DistilBertEmbeddings> embeddings_;
  std::shared_ptr<detail::DistilBertTransformer> transformer_;
};

/// transformers' DistilBertForSequenceClassification: distilbert.* (a DistilBertModel), then on
/// the first token pre_classifier, ReLU, dropout (seq_classif_dropout) and classifier.
class DistilBertForSequenceClassification : public PretrainedModel {
 public:
  using Config = DistilBertConfig;

  /// A freshly initialised model (see DistilBertModel); config.num_labels() outputs.
  explicit DistilBertForSequenceClassification(DistilBertConfig config);

  /// The Trainer's entry point: batch.input_ids / attention_mask (token_type_ids, which
  /// DistilBERT has no embedding for, are ignored as transformers' tokenizer omits them), and
  /// batch.labels when a loss is wanted (the loss as BertForSequenceClassification's).
  ModelOutput forward(const Batch& batch) override;
  bool supports_gradient_checkpointing() const override { return true; }
  void set_gradient_checkpointing(bool on) override { distilbert_->set_gradient_checkpointing(on); }

  /// Same, with tensors; `labels` may be undefined.
  ModelOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                      const torch::Tensor& labels = {});

  /// Loads a Hugging Face DistilBERT directory (PretrainedModel::load). A bare DistilBertModel
  /// checkpoint (no "distilbert." prefix) loads into distilbert.*, and pre_classifier.* and
  /// classifier.* are then missing and freshly initialised, as in transformers.
  static std::shared_ptr<DistilBertForSequenceClassification> from_pretrained(const std::filesystem::path& dir,
                                                                              const PretrainedOptions& options = {});

  /// "DistilBertForSequenceClassification", base_model_prefix "distilbert".
  const PretrainedModelInfo& info() const override;
  const PretrainedConfig& pretrained_config() const override { return config_; }
  /// config().to_json_string().
  std::string config_json() const override;

  /// The encoder (e.g. for its hidden states).
  DistilBertModel& distilbert() { return *distilbert_; }
  const DistilBertConfig& config() const { return config_; }

 private:
  DistilBertConfig config_;
  std::shared_ptr<DistilBertModel> distilbert_;
  torch::nn::Linear pre_classifier_{nullptr};
  torch::nn::Linear classifier_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace tenax::sdk
