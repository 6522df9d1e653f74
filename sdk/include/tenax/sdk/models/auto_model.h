// The registry of model families: config.json's model_type picks the family whose
// classification model from_pretrained loads, as transformers' Auto classes do. Adding a family
// is one line in sdk/src/models/auto_model.cpp (docs/trainer.md, "Adding a model family").
// Thread-safety: stateless (the table is constant).
//
//   auto model = AutoModelForClassification::from_pretrained(dir, PretrainedOptions().num_labels(2));
//   model->save_pretrained(out);          // whatever the family
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tenax/sdk/models/pretrained_model.h"

namespace tenax::sdk {

class AutoModelForClassification {
 public:
  /// The classification model of `dir`/config.json's model_type ("bert":
  /// BertForSequenceClassification, "distilbert": DistilBertForSequenceClassification, "vit":
  /// ViTForImageClassification), loaded
  /// by that family's from_pretrained. Throws ConfigError naming the file when model_type is
  /// missing or not registered (the message lists the registered ones).
  static std::shared_ptr<PretrainedModel> from_pretrained(const std::filesystem::path& dir,
                                                          const PretrainedOptions& options = {});

  /// The same family built from `dir`/config.json alone, with fresh weights (transformers'
  /// AutoModelFor...from_config): training from scratch. Errors as from_pretrained's.
  static std::shared_ptr<PretrainedModel> from_config(const std::filesystem::path& dir,
                                                      const PretrainedOptions& options = {});

  /// `dir`/config.json's model_type. Throws ConfigError when it is missing.
  static std::string model_type(const std::filesystem::path& dir);

  /// The registered model types, in registration order.
  static std::vector<std::string> model_types();
};

}  // namespace tenax::sdk
