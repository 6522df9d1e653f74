// BERT-family encoders (BERT, MiniLM) with a sequence-classification head, computing what
// Hugging Face transformers' BertModel / BertForSequenceClassification compute (fp32, eval
// mode: logits within 1e-4 of transformers on the same weights, tests/sdk/models).
//
// Parameter names are transformers' state-dict names ("bert.embeddings.word_embeddings.weight",
// "bert.encoder.layer.0.attention.self.query.weight", ..., "classifier.weight"), so
// named_parameters() maps 1:1 onto a model.safetensors and onto Tenax checkpoints.
// from_pretrained / save_pretrained (the PretrainedModel seam, pretrained_model.h) read and
// write Hugging Face model directories (config.json, model.safetensors, tokenizer files) that
// Python transformers loads unchanged.
// Thread-safety: as torch::nn::Module (one thread trains a model at a time).
//
//   auto model = std::make_shared<BertForSequenceClassification>(config);   // HF-style init
//   ModelOutput out = model->forward(batch);          // batch.input_ids, attention_mask, ...
//   out.loss.backward();                               // defined when batch.labels is
//
//   auto model = BertForSequenceClassification::from_pretrained(
//       ".assets/all-minilm-l6-v2", PretrainedOptions().num_labels(3));
//   model->save_pretrained("runs/x/model");           // + vocab.txt etc. from the source dir
#pragma once

#include <filesystem>
#include <memory>

#include <torch/nn/module.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include "tenax/sdk/models/bert_config.h"
#include "tenax/sdk/models/pretrained_model.h"

namespace tenax::sdk {

namespace detail {
class BertEmbeddings;
class BertEncoder;
class BertPooler;
}  // namespace detail

/// The encoder's outputs.
struct BertOutput {
  torch::Tensor last_hidden_state;  ///< [batch, seq, hidden]
  torch::Tensor pooler_output;      ///< [batch, hidden]: tanh(dense(hidden state of [CLS]))
};

/// transformers' BertModel with its pooler. Parameters: embeddings.*, encoder.layer.<i>.*,
/// pooler.dense.*.
class BertModel : public torch::nn::Module {
 public:
  /// Builds the layers and initialises every weight as transformers' _init_weights does
  /// (normal(0, initializer_range), zero biases, LayerNorm 1/0, padding row zero), drawing
  /// from the default CPU generator. Throws ConfigError when `config` does not validate.
  explicit BertModel(const BertConfig& config);
  ~BertModel() override;

  /// input_ids [batch, seq] int64; attention_mask [batch, seq] (1 = token, 0 = padding;
  /// undefined = all ones); token_type_ids [batch, seq] (undefined = all zeros).
  /// Throws ConfigError when seq exceeds max_position_embeddings or shapes disagree.
  BertOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                     const torch::Tensor& token_type_ids = {});
  /// Each encoder layer recomputed in backward while training (checkpoint_activations).
  void set_gradient_checkpointing(bool on);

 private:
  BertConfig config_;
  std::shared_ptr<detail::BertEmbeddings> embeddings_;
  std::shared_ptr<detail::BertEncoder> encoder_;
  std::shared_ptr<detail::BertPooler> pooler_;
};

/// transformers' BertForSequenceClassification: bert.* (a BertModel), dropout, classifier.*.
class BertForSequenceClassification : public PretrainedModel {
 public:
  using Config = BertConfig;

  /// A freshly initialised model (see BertModel); config.num_labels() outputs.
  explicit BertForSequenceClassification(BertConfig config);

  /// The Trainer's entry point: batch.input_ids / attention_mask / token_type_ids, and
  /// batch.labels when a loss is wanted. Loss as transformers computes it:
  ///   regression (num_labels 1 or problem_type regression): MSE(logits, float labels);
  ///   single_label_classification (int64 labels): cross-entropy;
  ///   multi_label_classification (float labels, num_labels > 1): BCE with logits.
  /// An unset problem_type is decided at the first forward with labels and kept in config()
  /// (so save_pretrained writes it), exactly as transformers does.
  ModelOutput forward(const Batch& batch) override;
  bool supports_gradient_checkpointing() const override { return true; }
  void set_gradient_checkpointing(bool on) override { bert_->set_gradient_checkpointing(on); }

  /// Same, with tensors; `labels` may be undefined.
  ModelOutput forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                      const torch::Tensor& token_type_ids, const torch::Tensor& labels = {});

  /// Loads a Hugging Face model directory (PretrainedModel::load): `dir`/config.json
  /// (BertConfig::from_json_file, then `options`) and `dir`/model.safetensors by parameter
  /// name. A checkpoint of a bare BertModel (no "bert." prefix, e.g. all-MiniLM-L6-v2) loads into bert.*, as
  /// transformers does; its non-persistent buffers (embeddings.position_ids, token_type_ids) are ignored. F16/BF16
  /// tensors are converted to float32. Weights the checkpoint lacks keep the fresh
  /// initialisation and are logged as transformers logs them ("Some weights of
  /// BertForSequenceClassification were not initialized ... newly initialized: [...]"); unused
  /// checkpoint tensors are logged too (loading_info()).
  /// Throws ConfigError (config.json: file and key) and StorageError (model.safetensors missing
  /// or corrupt; a tensor with the wrong shape or a non-floating dtype: file and tensor name).
  static std::shared_ptr<BertForSequenceClassification> from_pretrained(const std::filesystem::path& dir,
                                                                        const PretrainedOptions& options = {});

  /// "BertForSequenceClassification", base_model_prefix "bert".
  const PretrainedModelInfo& info() const override;
  const PretrainedConfig& pretrained_config() const override { return config_; }
  /// config().to_json_string().
  std::string config_json() const override;

  /// The encoder (e.g. for its last hidden state).
  BertModel& bert() { return *bert_; }
  const BertConfig& config() const { return config_; }

 private:
  BertConfig config_;
  std::shared_ptr<BertModel> bert_;
  torch::nn::Dropout dropout_{nullptr};
  torch::nn::Linear classifier_{nullptr};
};

}  // namespace tenax::sdk
