#include "tenax/sdk/models/vit.h"

#include <string>

#include "models/classification_loss.h"
#include "models/linear.h"
#include "models/vit/vit_layers.h"
#include "tenax/core/error.h"

namespace tenax::sdk {

ViTModel::ViTModel(const ViTConfig& config, ViTPooler pooler) : config_(config) {
  config_.validate("ViTConfig");
  embeddings_ = register_module("embeddings", std::make_shared<detail::ViTEmbeddings>(config_));
  encoder_ = register_module("encoder", std::make_shared<detail::ViTEncoder>(config_));
  layernorm_ = register_module(
      "layernorm",
      torch::nn::LayerNorm(torch::nn::LayerNormOptions({config_.hidden_size}).eps(config_.layer_norm_eps)));
  if (pooler == ViTPooler::kWith) {
    // transformers' ViTPooler is a module "pooler" holding "dense".
    auto holder = std::make_shared<torch::nn::Module>();
    pooler_dense_ = holder->register_module("dense", torch::nn::Linear(config_.hidden_size, config_.hidden_size));
    register_module("pooler", holder);
  }
  detail::init_vit_weights(*this, config_.initializer_range);
}

ViTModel::~ViTModel() = default;

void ViTModel::set_gradient_checkpointing(bool on) { encoder_->gradient_checkpointing = on; }

ViTOutput ViTModel::forward(const torch::Tensor& pixel_values_in, PositionEncoding positions) {
  if (!pixel_values_in.defined() || pixel_values_in.dim() != 4) {
    throw ConfigError("ViT forward: pixel_values must be a [batch, channels, height, width] tensor");
  }
  const auto pixel_values = pixel_values_in.to(torch::kFloat32);
  const auto channels = pixel_values.size(1), height = pixel_values.size(2), width = pixel_values.size(3);
  if (channels != config_.num_channels) {
    throw ConfigError("ViT forward: pixel_values have " + std::to_string(channels) + " channels, the model " +
                      std::to_string(config_.num_channels) + " (num_channels)");
  }
  if (positions == PositionEncoding::kFixed && (height != config_.image_size || width != config_.image_size)) {
    throw ConfigError("ViT forward: input image size (" + std::to_string(height) + "*" + std::to_string(width) +
                      ") doesn't match the model (" + std::to_string(config_.image_size) + "*" +
                      std::to_string(config_.image_size) +
                      "); resize the images (ViTImageProcessor) or interpolate the position encoding");
  }
  if (height % config_.patch_size != 0 || width % config_.patch_size != 0) {
    throw ConfigError("ViT forward: image size " + std::to_string(height) + "*" + std::to_string(width) +
                      " is not a multiple of patch_size " + std::to_string(config_.patch_size));
  }
  ViTOutput out;
  out.hidden_states = encoder_->forward(embeddings_->forward(pixel_values, positions));
  out.last_hidden_state = layernorm_(out.hidden_states.back());
  if (pooler_dense_) out.pooler_output = torch::tanh(detail::linear(pooler_dense_, out.last_hidden_state.select(1, 0)));
  return out;
}

ViTForImageClassification::ViTForImageClassification(ViTConfig config) : config_(std::move(config)) {
  config_.validate("ViTConfig");
  vit_ = register_module("vit", std::make_shared<ViTModel>(config_, ViTPooler::kWithout));
  classifier_ = register_module("classifier", torch::nn::Linear(config_.hidden_size, config_.num_labels()));
  detail::init_vit_weights(*this, config_.initializer_range);  // as post_init: the head too
}

ModelOutput ViTForImageClassification::forward(const Batch& batch) {
  if (!batch.pixel_values.defined()) {
    throw ConfigError("ViTForImageClassification: the batch has no pixel_values (an image collator fills them)");
  }
  return forward(batch.pixel_values, batch.labels);
}

ModelOutput ViTForImageClassification::forward(const torch::Tensor& pixel_values, const torch::Tensor& labels,
                                               PositionEncoding positions) {
  const ViTOutput encoded = vit_->forward(pixel_values, positions);
  ModelOutput out;
  out.logits = detail::linear(classifier_, encoded.last_hidden_state.select(1, 0));
  if (labels.defined()) out.loss = detail::classification_loss(config_, out.logits, labels);
  return out;
}

std::shared_ptr<ViTForImageClassification> ViTForImageClassification::from_pretrained(
    const std::filesystem::path& dir, const PretrainedOptions& options) {
  return load<ViTForImageClassification>(dir, options);
}

const PretrainedModelInfo& ViTForImageClassification::info() const {
  static const PretrainedModelInfo kInfo{"ViTForImageClassification", "vit", {}};
  return kInfo;
}

std::string ViTForImageClassification::config_json() const { return config_.to_json_string(); }

}  // namespace tenax::sdk
