// PretrainedConfig: what every model family's config.json shares, as transformers'
// PretrainedConfig has it: the classification labels (id2label, hence num_labels) and the
// problem_type that picks the loss. Each family's typed config (BertConfig, DistilBertConfig, ...)
// derives from it and adds its architecture keys; sdk/src/models/config_json.h parses and writes
// these shared keys the same way for every family.
// Torch-free. Thread-safety: a plain value.
//
//   DistilBertConfig config = DistilBertConfig::from_json_file(dir / "config.json");
//   config.set_num_labels(3);            // LABEL_0..LABEL_2, as transformers does
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace tenax::sdk {

/// transformers' `problem_type`: which loss a classification head computes.
enum class ProblemType { kRegression, kSingleLabelClassification, kMultiLabelClassification };

/// "regression", "single_label_classification", "multi_label_classification".
const char* problem_type_name(ProblemType type);

/// Label names by class index.
using Id2Label = std::map<std::int64_t, std::string>;

struct PretrainedConfig {
  /// Label names by class index; its size is num_labels. transformers' default: 2 labels.
  Id2Label id2label = {{0, "LABEL_0"}, {1, "LABEL_1"}};
  /// Unset: decided from num_labels and the labels' dtype at the first forward with labels.
  std::optional<ProblemType> problem_type;

  /// Number of classifier outputs (id2label.size()).
  std::int64_t num_labels() const { return static_cast<std::int64_t>(id2label.size()); }
  /// Replaces id2label by LABEL_0..LABEL_{n-1} when its size differs from n (transformers'
  /// `config.num_labels = n`). Throws ConfigError for n < 1.
  void set_num_labels(std::int64_t n);
  /// Throws ConfigError naming `where` when id2label is empty or not indexed 0..n-1.
  void validate_labels(const std::string& where) const;
};

}  // namespace tenax::sdk
