#include "tenax/sdk/tokenized_text_dataset.h"

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

TokenizedTextDataset::TokenizedTextDataset(const TextRecords& records, const LabelMap& labels,
                                           const BertTokenizer& tokenizer, std::int64_t max_length)
    : TokenizedTextDataset(records, torch::tensor(labels.ids(records), torch::kInt64), tokenizer, max_length) {}

TokenizedTextDataset::TokenizedTextDataset(const TextRecords& records, torch::Tensor targets,
                                           const BertTokenizer& tokenizer, std::int64_t max_length)
    : targets_(std::move(targets)) {
  if (!targets_.defined() || targets_.dim() < 1 || targets_.size(0) != static_cast<std::int64_t>(records.size())) {
    throw Error("TokenizedTextDataset: " + records.path + " has " + std::to_string(records.size()) +
                " records but the targets have " +
                (targets_.defined() && targets_.dim() >= 1 ? std::to_string(targets_.size(0)) : std::string("no")) +
                " rows");
  }
  targets_ = targets_.contiguous();
  if (targets_.scalar_type() == torch::kInt64 && targets_.dim() == 1) {
    labels_.assign(targets_.data_ptr<std::int64_t>(), targets_.data_ptr<std::int64_t>() + targets_.numel());
  }
  const auto options = EncodeOptions().truncation(Truncation::kLongestFirst).max_length(max_length);
  encodings_.reserve(records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    try {
      encodings_.push_back(records.paired ? tokenizer.encode(records.texts[i], records.text_pairs[i], options)
                                          : tokenizer.encode(records.texts[i], options));
    } catch (const Error& e) {
      throw ConfigError(records.path + ":" + std::to_string(records.lines[i]) + ": " + e.what());
    }
  }
}

const Encoding& TokenizedTextDataset::encoding(std::int64_t index) const {
  if (index < 0 || index >= size()) {
    throw Error("TokenizedTextDataset: index " + std::to_string(index) + " outside [0, " + std::to_string(size()) +
                ")");
  }
  return encodings_[static_cast<std::size_t>(index)];
}

Example TokenizedTextDataset::get(std::int64_t index) const {
  const Encoding& e = encoding(index);
  const auto length = static_cast<std::int64_t>(e.size());
  torch::Tensor input = torch::empty({2, length}, torch::kInt64);
  auto a = input.accessor<std::int64_t, 2>();
  for (std::int64_t i = 0; i < length; ++i) {
    a[0][i] = e.input_ids[static_cast<std::size_t>(i)];
    a[1][i] = e.token_type_ids[static_cast<std::size_t>(i)];
  }
  return {input, targets_[index].clone()};
}

std::int64_t TokenizedTextDataset::length(std::int64_t index) const {
  return static_cast<std::int64_t>(encoding(index).size());
}

}  // namespace tenax::sdk
