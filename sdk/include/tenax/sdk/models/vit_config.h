// ViTConfig: the `config.json` of a Hugging Face ViT model directory, as a typed value
// (transformers' ViTConfig). Strict as BertConfig is: the architecture keys (hidden_size,
// num_hidden_layers, num_attention_heads, intermediate_size, image_size, patch_size) are
// required; image_size and patch_size must be integers (square images and patches; a
// [height, width] list is refused rather than guessed); hidden_act must be "gelu".
// Torch-free. Thread-safety: a plain value.
//
//   ViTConfig config = ViTConfig::from_json_file(dir / "config.json");
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "tenax/sdk/models/pretrained_config.h"

namespace tenax::sdk {

/// ViT's architecture keys, with transformers' defaults (vit-base-patch16-224's); the labels and
/// problem_type come from PretrainedConfig.
struct ViTConfig : PretrainedConfig {
  std::int64_t hidden_size = 768;
  std::int64_t num_hidden_layers = 12;
  std::int64_t num_attention_heads = 12;
  std::int64_t intermediate_size = 3072;
  double hidden_dropout_prob = 0.0;
  double attention_probs_dropout_prob = 0.0;
  double initializer_range = 0.02;
  double layer_norm_eps = 1e-12;
  std::int64_t image_size = 224;  ///< pixels per side of the images the position table is for
  std::int64_t patch_size = 16;   ///< pixels per side of a patch
  std::int64_t num_channels = 3;
  bool qkv_bias = true;
  /// Read and written for transformers' masked-image-modeling head; unused here.
  std::int64_t encoder_stride = 16;

  /// Patches per image side (image_size / patch_size).
  std::int64_t patches_per_side() const { return image_size / patch_size; }

  /// Throws ConfigError naming `where` and the key when a value is out of range (non-positive
  /// sizes, hidden_size not divisible by num_attention_heads, image_size not a multiple of
  /// patch_size, probabilities outside [0, 1), id2label not 0..n-1).
  void validate(const std::string& where) const;

  /// Parses and validates a config.json (model_type "vit" when present).
  static ViTConfig from_json_file(const std::filesystem::path& path);
  /// As from_json_file, on text already read; `where` names the source in errors.
  static ViTConfig from_json_string(const std::string& text, const std::string& where);

  /// The config.json transformers writes for ViTForImageClassification; keys sorted.
  std::string to_json_string() const;
};

}  // namespace tenax::sdk
