#include "text_data.h"

#include <filesystem>

#include "tenax/core/error.h"
#include "tenax/sdk/text_collator.h"
#include "tenax/sdk/text_targets.h"
#include "tenax/sdk/tokenized_text_dataset.h"

namespace tenax::train {
namespace {

sdk::TextRecords read_split(const std::string& path, const std::string& key, const JobOptions& o, std::int64_t limit) {
  if (!std::filesystem::is_regular_file(path)) {
    throw ConfigError("data." + key + ": " + path + " is not a file (missing, or a directory); fix the path" +
                      fetch_assets_hint(path));
  }
  auto options = sdk::TextFileOptions()
                     .text_column(o.data.text_column_names.at(0))
                     .label_column(o.data.label_column_name)
                     .format(o.choices.format);
  if (o.data.text_column_names.size() == 2) options.text_pair_column(o.data.text_column_names[1]);
  sdk::TextRecords records = sdk::read_text_records(path, options);
  if (records.size() == 0) {
    throw ConfigError("data." + key + ": " + path +
                      " has no rows (a header or a Parquet schema only); give it data or drop the key");
  }
  if (limit > 0) records.truncate(static_cast<std::size_t>(limit));
  return records;
}

}  // namespace

JobData load_text_data(const JobOptions& o, const sdk::BertTokenizer& tokenizer) {
  JobData data;
  const sdk::TextRecords train = read_split(o.data.train_file, "train_file", o, o.data.max_train_samples);
  data.problem_type = o.choices.problem_type.value_or(sdk::infer_problem_type(train, o.data.label_separator));
  if (data.problem_type == sdk::ProblemType::kRegression && !o.data.label_names.empty()) {
    throw ConfigError("data.label_names: a regression job has no classes; drop the key or set model.problem_type");
  }
  std::optional<sdk::LabelMap> labels;
  if (data.problem_type != sdk::ProblemType::kRegression) {
    labels = o.data.label_names.empty()
                 ? sdk::LabelMap(sdk::label_names(train, data.problem_type, o.data.label_separator))
                 : sdk::LabelMap::in_order(o.data.label_names);
    data.label_names = labels->names();
    if (data.problem_type == sdk::ProblemType::kSingleLabelClassification && data.label_names.size() < 2) {
      throw ConfigError("data.train_file: " + o.data.train_file + " has one label only ('" + data.label_names[0] +
                        "'); a classifier needs two or more (or list them in data.label_names)");
    }
  }
  // Regression reads no label map; text_targets still takes one.
  const sdk::LabelMap label_map = labels.value_or(sdk::LabelMap({"unused"}));
  const auto dataset = [&](const sdk::TextRecords& records) {
    return std::make_shared<sdk::TokenizedTextDataset>(
        records, sdk::text_targets(records, data.problem_type, label_map, o.data.label_separator), tokenizer,
        o.data.max_seq_length);
  };
  data.train = dataset(train);
  if (!o.data.validation_file.empty()) {
    data.validation = dataset(read_split(o.data.validation_file, "validation_file", o, o.data.max_eval_samples));
  }
  if (!o.data.test_file.empty()) {
    data.test = dataset(read_split(o.data.test_file, "test_file", o, o.data.max_predict_samples));
  }
  data.collator = sdk::text_collator(tokenizer.pad_id());
  data.summary = "train " + std::to_string(data.train->size()) + " texts" +
                 (data.validation ? ", validation " + std::to_string(data.validation->size()) : "") +
                 (data.test ? ", test " + std::to_string(data.test->size()) : "");
  return data;
}

}  // namespace tenax::train
