// PretrainedModel: the seam every model family sits on, so that a family is its layers and its
// typed config, and loading and saving Hugging Face model directories is written once.
//
// A family's head model (BertForSequenceClassification, DistilBertForSequenceClassification, ...)
// derives from PretrainedModel, names its parameters exactly as transformers' state dict does,
// and describes itself in a PretrainedModelInfo (transformers' class attributes: the architecture
// name, base_model_prefix, the non-persistent buffers old checkpoints carry). Then:
//   - from_pretrained (PretrainedModel::load<M>): config.json through M::Config::from_json_file,
//     PretrainedOptions applied (transformers' from_pretrained kwargs), the model built (fresh
//     initialisation as transformers' _init_weights, so the weights a checkpoint lacks, such as a
//     new head, are initialised as transformers initialises them), then model.safetensors copied
//     in by parameter name with transformers' prefix rule; missing and unexpected keys are
//     reported (loading_info()) and logged in transformers' words;
//   - save_pretrained: config.json, model.safetensors and the tokenizer / preprocessor files of
//     the source directory, replacing the target directory atomically; Python transformers
//     loads the result unchanged.
// A registry (auto_model.h) maps config.json's model_type to the family.
// Thread-safety: as torch::nn::Module (one thread trains a model at a time).
//
//   class DistilBertForSequenceClassification : public PretrainedModel { ... };
//   static std::shared_ptr<DistilBertForSequenceClassification> from_pretrained(dir, options) {
//     return load<DistilBertForSequenceClassification>(dir, options);
//   }
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/arg.h>

#include "tenax/sdk/model.h"
#include "tenax/sdk/models/pretrained_config.h"

namespace tenax::sdk {

/// What from_pretrained changes in the checkpoint's config.json (transformers' kwargs).
struct PretrainedOptions {
  /// Classifier outputs; LABEL_0..LABEL_{n-1} unless id2label is given too (sizes must agree).
  TORCH_ARG(std::optional<std::int64_t>, num_labels) = std::nullopt;
  /// Label names by class index 0..n-1.
  TORCH_ARG(std::optional<Id2Label>, id2label) = std::nullopt;
  /// The loss to use; unset keeps config.json's (or decides at the first forward with labels).
  TORCH_ARG(std::optional<ProblemType>, problem_type) = std::nullopt;
  /// transformers' ignore_mismatched_sizes: a checkpoint tensor whose shape differs from the
  /// parameter's (a head trained for other labels) leaves the fresh initialisation in place and
  /// is reported in mismatched_keys, instead of failing the load.
  TORCH_ARG(bool, ignore_mismatched_sizes) = false;
};

/// The name PretrainedOptions had when BERT was the only family.
using BertPretrainedOptions = PretrainedOptions;

/// What from_pretrained found, in the model's parameter names (transformers' loading_info).
struct LoadingInfo {
  std::vector<std::string> missing_keys;     ///< newly initialised, e.g. classifier.weight
  std::vector<std::string> unexpected_keys;  ///< in the checkpoint, used by no parameter
  /// With ignore_mismatched_sizes: parameters left freshly initialised because the
  /// checkpoint's tensor had another shape.
  std::vector<std::string> mismatched_keys;
};

/// A family's head model as the loader sees it: transformers' class attributes.
struct PretrainedModelInfo {
  /// The class name, written to config.json's architectures and used in log lines.
  std::string architecture;
  /// transformers' base_model_prefix ("bert", "distilbert"): the base model's module name. A
  /// checkpoint with no tensor under it is a bare base model's and loads into it.
  std::string base_model_prefix;
  /// Name suffixes of non-persistent buffers that old checkpoints carry and transformers drops
  /// without reporting them unexpected (e.g. "embeddings.position_ids").
  std::vector<std::string> ignored_buffers;
};

class PretrainedModel : public Model {
 public:
  /// The family's description (a static of the family).
  virtual const PretrainedModelInfo& info() const = 0;
  /// The config's shared part: labels and problem_type.
  virtual const PretrainedConfig& pretrained_config() const = 0;
  /// config.json as transformers writes it for this model.
  virtual std::string config_json() const = 0;

  /// Writes a Hugging Face model directory that transformers' from_pretrained loads unchanged:
  /// config.json (config_json()), model.safetensors (every parameter by its transformers name,
  /// float32, metadata {"format": "pt"}: the bytes Python's save_pretrained writes for the same
  /// weights) and, when the model came from from_pretrained, the tokenizer and preprocessor files
  /// of that directory (vocab.txt, tokenizer_config.json, tokenizer.json, special_tokens_map.json,
  /// preprocessor_config.json, those present). Atomic: everything is written and fsynced in a
  /// hidden sibling directory that then replaces `dir` in one rename (RENAME_EXCHANGE when `dir`
  /// exists), so a crash leaves the old directory or the new one, never a mix. Because `dir` is
  /// replaced whole, it must be absent, empty, or hold only those model files (ConfigError
  /// otherwise, naming the stray entry). Throws StorageError on I/O failure.
  void save_pretrained(const std::filesystem::path& dir) const;

  /// The directory from_pretrained read (empty for a model built from a config).
  const std::filesystem::path& pretrained_dir() const { return pretrained_dir_; }
  /// What from_pretrained found missing and unexpected.
  const LoadingInfo& loading_info() const { return loading_info_; }

  /// Family M built from `dir`/config.json with `options` applied and freshly initialised weights
  /// (transformers' from_config): training from scratch. model.safetensors is not read.
  template <typename M>
  static std::shared_ptr<M> from_config(const std::filesystem::path& dir, const PretrainedOptions& options) {
    auto config = M::Config::from_json_file(dir / "config.json");
    apply_options(config, options, dir);
    config.validate("from_config(" + dir.string() + ")");
    return std::make_shared<M>(std::move(config));
  }

 protected:
  /// from_pretrained for family M (M::Config, M(M::Config)): reads `dir`/config.json, applies
  /// `options`, builds M, then loads `dir`/model.safetensors (load_weights).
  template <typename M>
  static std::shared_ptr<M> load(const std::filesystem::path& dir, const PretrainedOptions& options) {
    auto config = M::Config::from_json_file(dir / "config.json");
    apply_options(config, options, dir);
    config.validate("from_pretrained(" + dir.string() + ")");
    auto model = std::make_shared<M>(std::move(config));
    static_cast<PretrainedModel&>(*model).load_weights(dir, options.ignore_mismatched_sizes());
    return model;
  }

  /// Overrides the labels and problem_type of `config` by `options`. Throws ConfigError when
  /// num_labels and id2label disagree.
  static void apply_options(PretrainedConfig& config, const PretrainedOptions& options,
                            const std::filesystem::path& dir);

  /// Copies `dir`/model.safetensors into the parameters by name, as transformers does: a
  /// checkpoint without any "<base_model_prefix>." tensor is a base model's and its names are
  /// prefixed; F16/BF16 tensors are converted to float32; parameters the checkpoint lacks keep
  /// their fresh initialisation (missing_keys); tensors no parameter takes are unexpected_keys
  /// (but for info().ignored_buffers); a tensor of another shape is an error, or with
  /// `ignore_mismatched_sizes` left out and listed in mismatched_keys. All three are logged as
  /// transformers logs them.
  /// Throws StorageError (model.safetensors missing or corrupt; a tensor with the wrong shape or
  /// a non-floating dtype: file and tensor name).
  void load_weights(const std::filesystem::path& dir, bool ignore_mismatched_sizes);

 private:
  std::filesystem::path pretrained_dir_;
  LoadingInfo loading_info_;
};

}  // namespace tenax::sdk
