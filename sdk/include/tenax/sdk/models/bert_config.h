// BertConfig: the `config.json` of a Hugging Face BERT-family model directory, as a typed value.
//
// Parsing is strict where a wrong value would silently build a different network: the
// architecture keys (vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
// intermediate_size, max_position_embeddings, type_vocab_size) are required, every key read
// must have the right JSON type and range, and `hidden_act` / `position_embedding_type` values
// this implementation does not compute ("relu", "relative_key", ...) are refused instead of
// being approximated. Keys that only matter to Python (use_cache, gradient_checkpointing, ...)
// are ignored. Every error is a tenax::ConfigError naming the file and the key.
// Torch-free. Thread-safety: a plain value.
//
//   BertConfig config = BertConfig::from_json_file(dir / "config.json");
//   config.set_num_labels(3);                 // LABEL_0..LABEL_2, as transformers does
//   files::atomic_write(out / "config.json", config.to_json_string());
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "tenax/sdk/models/pretrained_config.h"

namespace tenax::sdk {

/// The activation of the feed-forward block. Only exact (erf) GELU, transformers' "gelu".
enum class HiddenAct { kGelu };

/// BERT's architecture keys; the labels and problem_type come from PretrainedConfig.
struct BertConfig : PretrainedConfig {
  std::int64_t vocab_size = 30522;
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  HiddenAct hidden_act = HiddenAct::kGelu;
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  std::int64_t max_position_embeddings = 512;
  std::int64_t type_vocab_size = 2;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  std::int64_t pad_token_id = 0;
  /// Dropout before the classifier; hidden_dropout_prob when unset (transformers' rule).
  std::optional<double> classifier_dropout;
  /// Dropout probability applied to the pooled output.
  double effective_classifier_dropout() const { return classifier_dropout.value_or(hidden_dropout_prob); }

  /// Throws ConfigError naming `where` and the offending key when a value is out of range
  /// (non-positive sizes, hidden_size not divisible by num_attention_heads, probabilities
  /// outside [0, 1), pad_token_id outside the vocabulary, id2label not 0..n-1, ...).
  void validate(const std::string& where) const;

  /// Parses and validates a config.json. Throws ConfigError (file, key) for a missing file,
  /// bad JSON, a missing or mistyped key, or an unsupported value.
  static BertConfig from_json_file(const std::filesystem::path& path);
  /// As from_json_file, on text already read; `where` names the source in errors.
  static BertConfig from_json_string(const std::string& text, const std::string& where);

  /// The config.json transformers writes for BertForSequenceClassification: every field above,
  /// model_type "bert", architectures ["BertForSequenceClassification"], id2label with string
  /// keys and the inverse label2id; keys sorted, two-space indent, trailing newline.
  std::string to_json_string() const;
};

}  // namespace tenax::sdk
