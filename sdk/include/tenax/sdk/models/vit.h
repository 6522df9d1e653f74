// Vision Transformer with an image-classification head, computing what Hugging Face
// transformers' ViTModel / ViTForImageClassification compute (eager attention; fp32, eval mode:
// hidden states and logits within 1e-4 of transformers on the same weights,
// tests/sdk/models/vit_test.cpp): patch embedding (a strided Conv2d), the [CLS] token, learned
// position embeddings (bicubically interpolated to another image size on request, as
// transformers' interpolate_pos_encoding does), pre-norm encoder layers, final LayerNorm.
//
// Parameter names are transformers' ("vit.embeddings.cls_token",
// "vit.embeddings.patch_embeddings.projection.weight",
// "vit.encoder.layer.0.attention.attention.query.weight", "vit.layernorm.weight",
// "classifier.weight"); from_pretrained / save_pretrained come from the PretrainedModel seam.
// Inputs are Batch::pixel_values, [batch, channels, height, width] float, as ViTImageProcessor
// makes them (tenax/sdk/vision/vit_image_processor.h).
// Thread-safety: as torch::nn::Module (one thread trains a model at a time).
//
//   auto model = ViTForImageClassification::from_pretrained(dir, PretrainedOptions().num_labels(10));
//   ModelOutput out = model->forward(batch);      // batch.pixel_values, batch.labels
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/types.h>

#include "tenax/sdk/models/pretrained_model.h"
#include "tenax/sdk/models/vit_config.h"

namespace tenax::sdk {

namespace detail {
class ViTEmbeddings;
class ViTEncoder;
}  // namespace detail

/// Whether ViTModel has transformers' pooler (tanh(dense(first token))): ViTModel's default;
/// ViTForImageClassification builds its ViTModel without it.
enum class ViTPooler { kWith, kWithout };

/// How the position table meets an image: as is (the image must be config.image_size square),
/// or bicubically interpolated to the image's patch grid (transformers' interpolate_pos_encoding).
enum class PositionEncoding { kFixed, kInterpolate };

/// The encoder's outputs.
struct ViTOutput {
  torch::Tensor last_hidden_state;  ///< [batch, 1 + patches, hidden], after the final LayerNorm
  torch::Tensor pooler_output;      ///< [batch, hidden]; undefined without the pooler
  /// transformers' output_hidden_states: the embeddings, then each layer's output (before the
  /// final LayerNorm); num_hidden_layers + 1 tensors.
  std::vector<torch::Tensor> hidden_states;
};

/// transformers' ViTModel. Parameters: embeddings.*, encoder.layer.<i>.*, layernorm.*, and
/// pooler.dense.* with the pooler.
class ViTModel : public torch::nn::Module {
 public:
  /// Builds the layers and initialises every weight as transformers' _init_weights does
  /// (Linear, Conv2d, the position table and [CLS]: normal(0, initializer_range) truncated at
  /// +-2, i.e. untruncated for any sane range; zero biases; LayerNorm 1/0), drawing from the
  /// default CPU generator. Throws ConfigError when `config` does not validate.
  explicit ViTModel(const ViTConfig& config, ViTPooler pooler = ViTPooler::kWith);
  ~ViTModel() override;

  /// pixel_values [batch, num_channels, height, width] (converted to float32). Throws
  /// ConfigError when the channels differ from the config or, with kFixed, the size differs from
  /// image_size (kInterpolate takes any size with height and width multiples of patch_size).
  ViTOutput forward(const torch::Tensor& pixel_values, PositionEncoding positions = PositionEncoding::kFixed);
  /// Each encoder layer recomputed in backward while training (checkpoint_activations).
  void set_gradient_checkpointing(bool on);

 private:
  ViTConfig config_;
  std::shared_ptr<detail::ViTEmbeddings> embeddings_;
  std::shared_ptr<detail::ViTEncoder> encoder_;
  torch::nn::LayerNorm layernorm_{nullptr};
  torch::nn::Linear pooler_dense_{nullptr};
};

/// transformers' ViTForImageClassification: vit.* (a ViTModel without pooler) and classifier.*
/// on the final hidden state of the [CLS] token.
class ViTForImageClassification : public PretrainedModel {
 public:
  using Config = ViTConfig;

  /// A freshly initialised model (see ViTModel); config.num_labels() outputs.
  explicit ViTForImageClassification(ViTConfig config);

  /// The Trainer's entry point: batch.pixel_values, and batch.labels when a loss is wanted (the
  /// loss as BertForSequenceClassification's). Images must be image_size square.
  ModelOutput forward(const Batch& batch) override;
  bool supports_gradient_checkpointing() const override { return true; }
  void set_gradient_checkpointing(bool on) override { vit_->set_gradient_checkpointing(on); }

  /// Same, with tensors; `labels` may be undefined.
  ModelOutput forward(const torch::Tensor& pixel_values, const torch::Tensor& labels = {},
                      PositionEncoding positions = PositionEncoding::kFixed);

  /// Loads a Hugging Face ViT directory (PretrainedModel::load). A bare ViTModel checkpoint
  /// (no "vit." prefix) loads into vit.*; its pooler.* tensors are then unexpected and
  /// classifier.* missing, as in transformers.
  static std::shared_ptr<ViTForImageClassification> from_pretrained(const std::filesystem::path& dir,
                                                                    const PretrainedOptions& options = {});

  /// "ViTForImageClassification", base_model_prefix "vit".
  const PretrainedModelInfo& info() const override;
  const PretrainedConfig& pretrained_config() const override { return config_; }
  /// config().to_json_string().
  std::string config_json() const override;

  /// The encoder (e.g. for its hidden states).
  ViTModel& vit() { return *vit_; }
  const ViTConfig& config() const { return config_; }

 private:
  ViTConfig config_;
  std::shared_ptr<ViTModel> vit_;
  torch::nn::Linear classifier_{nullptr};
};

}  // namespace tenax::sdk
