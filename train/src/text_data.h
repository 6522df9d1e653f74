// The data of a `tenax train` text job: the splits read (CSV, TSV, JSON Lines), the task decided
// (problem type, label list), every split's targets made and its texts tokenized — all before
// the job joins its peers, so that bad data ends the job with exit 2 before any rank trains
// and a warm spare has it ready. Errors are ConfigError naming the file, the row and the key.
// Thread-safety: built once on the main thread; immutable afterwards.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "job_options.h"
#include "tenax/sdk/models/pretrained_config.h"
#include "tenax/sdk/text/bert_tokenizer.h"
#include "tenax/sdk/text_dataset.h"
#include "tenax/sdk/tokenized_text_dataset.h"

namespace tenax::train {

struct TextData {
  sdk::ProblemType problem_type = sdk::ProblemType::kSingleLabelClassification;
  /// Class names in id order; empty for regression.
  std::vector<std::string> label_names;
  std::shared_ptr<sdk::TokenizedTextDataset> train;
  std::shared_ptr<sdk::TokenizedTextDataset> validation;  ///< null without data.validation_file
  std::shared_ptr<sdk::TokenizedTextDataset> test;        ///< null without data.test_file

  /// Classifier outputs: the label count, 1 for regression.
  std::int64_t num_labels() const { return label_names.empty() ? 1 : static_cast<std::int64_t>(label_names.size()); }
};

TextData load_text_data(const JobOptions& options, const sdk::BertTokenizer& tokenizer);

}  // namespace tenax::train
