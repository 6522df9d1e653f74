// What a text job predicts, read from the label column of TextRecords, as transformers'
// run_classification.py decides it: single-label classes, several labels per text, or a number.
//
// Labels stay strings in TextRecords; this is the one place that parses them, once, at load
// time, into the tensor the loss reads:
//   single-label   int64 [N]      class ids through a LabelMap
//   multi-label    float [N, L]   multi-hot rows; a label field is a JSON array (JSON Lines:
//                                 ["a", "b"] or [0, 2]) or names joined by a separator ("a|b")
//   regression     float [N]      each label a number
// Errors are ConfigError naming the file and line and what to do (a label that is not a
// number, a label outside the label list, an empty multi-label field is allowed: no labels).
// Thread-safety: pure functions.
//
//   auto train = read_text_records("train.jsonl", TextFileOptions().label_column("labels"));
//   ProblemType type = infer_problem_type(train, "");              // multi-label: arrays
//   LabelMap labels = LabelMap(label_names(train, type, ""));
//   torch::Tensor y = text_targets(train, type, labels, "");      // float [N, L]
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <torch/types.h>

#include "tenax/sdk/models/pretrained_config.h"
#include "tenax/sdk/text_dataset.h"

namespace tenax::sdk {

/// transformers' rule: a label field that holds a list (a JSON array, or `separator` given)
/// is multi-label; labels that are all numbers, at least one not an integer, are regression;
/// anything else is single-label classification.
ProblemType infer_problem_type(const TextRecords& records, const std::string& separator);

/// The distinct label names in `records` (for a LabelMap): single-label fields as they are,
/// multi-label fields split. Regression has none (empty).
std::vector<std::string> label_names(const TextRecords& records, ProblemType type, const std::string& separator);

/// The targets of `records` (shapes above). `labels` is unused for regression.
torch::Tensor text_targets(const TextRecords& records, ProblemType type, const LabelMap& labels,
                           const std::string& separator);

/// The labels of one multi-label field: a JSON array's elements (strings, or numbers written
/// as JSON writes them), else the field split on `separator`; empty field: none. Throws
/// ConfigError (without file and line; callers add them) for a malformed array or a list with
/// no separator to split it.
std::vector<std::string> split_multi_label(const std::string& field, const std::string& separator);

}  // namespace tenax::sdk
