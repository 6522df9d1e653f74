// DistilBertConfig: the `config.json` of a Hugging Face DistilBERT model directory, as a typed
// value (transformers' DistilBertConfig: dim, n_layers, n_heads, hidden_dim, ...).
//
// Strict as BertConfig is: the architecture keys (vocab_size, dim, n_layers, n_heads,
// hidden_dim, max_position_embeddings) are required, every key read must have the right JSON
// type and range, and an `activation` this implementation does not compute is refused. Keys
// that only matter to Python are ignored. Errors are tenax::ConfigError naming file and key.
// Torch-free. Thread-safety: a plain value.
//
//   DistilBertConfig config = DistilBertConfig::from_json_file(dir / "config.json");
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "tenax/sdk/models/pretrained_config.h"

namespace tenax::sdk {

/// The feed-forward activation: transformers' "gelu" (exact, erf) or "relu".
enum class DistilBertActivation { kGelu, kRelu };

/// DistilBERT's architecture keys, with transformers' defaults (distilbert-base-uncased's);
/// the labels and problem_type come from PretrainedConfig.
struct DistilBertConfig : PretrainedConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t max_position_embeddings = 512;
  /// Fixed sin/cos position embeddings at initialisation instead of normal(0, initializer_range).
  bool sinusoidal_pos_embds = false;
  std::int64_t n_layers = 6;
  std::int64_t n_heads = 12;
  std::int64_t dim = 768;
  std::int64_t hidden_dim = 3072;
  double dropout = 0.1;
  double attention_dropout = 0.1;
  DistilBertActivation activation = DistilBertActivation::kGelu;
  double initializer_range = 0.02;
  /// Read and written for transformers' question-answering head; unused here.
  double qa_dropout = 0.1;
  /// Dropout before the classifier.
  double seq_classif_dropout = 0.2;
  std::int64_t pad_token_id = 0;

  /// Throws ConfigError naming `where` and the offending key when a value is out of range
  /// (non-positive sizes, dim not divisible by n_heads, probabilities outside [0, 1),
  /// pad_token_id outside the vocabulary, id2label not 0..n-1).
  void validate(const std::string& where) const;

  /// Parses and validates a config.json (model_type "distilbert" when present).
  static DistilBertConfig from_json_file(const std::filesystem::path& path);
  /// As from_json_file, on text already read; `where` names the source in errors.
  static DistilBertConfig from_json_string(const std::string& text, const std::string& where);

  /// The config.json transformers writes for DistilBertForSequenceClassification: every field
  /// above, model_type "distilbert", architectures, id2label/label2id; keys sorted.
  std::string to_json_string() const;
};

}  // namespace tenax::sdk
