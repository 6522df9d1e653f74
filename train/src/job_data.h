// The data of a `tenax train` job, whatever its modality: the task (problem type, label list)
// and the splits as Datasets with the collator that batches them. Made before the job joins its
// peers (text_data.h, image_data.h), so that bad data ends the job with exit 2 before any rank
// trains and a warm spare has it ready.
// Thread-safety: built once on the main thread; immutable afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tenax/sdk/data.h"
#include "tenax/sdk/models/pretrained_config.h"

namespace tenax::train {

struct JobData {
  sdk::ProblemType problem_type = sdk::ProblemType::kSingleLabelClassification;
  /// Class names in id order; empty for regression.
  std::vector<std::string> label_names;
  std::shared_ptr<const sdk::Dataset> train;
  std::shared_ptr<const sdk::Dataset> validation;  ///< null without a validation split
  std::shared_ptr<const sdk::Dataset> test;        ///< null without a test split
  sdk::Collator collator;
  std::string summary;  ///< the splits' sizes, for the log

  /// Classifier outputs: the label count, 1 for regression.
  std::int64_t num_labels() const { return label_names.empty() ? 1 : static_cast<std::int64_t>(label_names.size()); }
};

}  // namespace tenax::train
