// A Dataset of tokenized labeled text for the Trainer: every record of a TextRecords is
// tokenized once, up front (truncated to max_length, not padded; the collator pads each batch
// to its own longest).
//
// get(i) returns Example{input: int64 [2, L] — row 0 input ids, row 1 token type ids —,
// label: row i of the targets: an int64 class id, a float (regression) or a float multi-hot
// row (multi-label; text_targets.h)}; text_collator() turns a vector of those into a Batch.
// Thread-safety: immutable after construction; get() is safe from any thread.
//
//   auto tok = tenax::sdk::BertTokenizer::from_pretrained(model_dir);
//   auto train = tenax::sdk::read_text_records(data_dir + "/train.csv");
//   auto labels = tenax::sdk::LabelMap::from_records(train);
//   auto dataset = std::make_shared<tenax::sdk::TokenizedTextDataset>(train, labels, tok, 128);
//   tenax::sdk::Trainer trainer(model, args, dataset, ctx, tenax::sdk::text_collator(tok.pad_id()));
#pragma once

#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "tenax/sdk/data.h"
#include "tenax/sdk/text/bert_tokenizer.h"
#include "tenax/sdk/text_dataset.h"

namespace tenax::sdk {

class TokenizedTextDataset : public Dataset {
 public:
  /// Tokenizes with Truncation::kLongestFirst to `max_length` (pairs when records.paired).
  /// Labels go through `labels` (an unknown label throws ConfigError naming file and line).
  TokenizedTextDataset(const TextRecords& records, const LabelMap& labels, const BertTokenizer& tokenizer,
                       std::int64_t max_length);
  /// As above with the targets already made (text_targets()): one row per record.
  TokenizedTextDataset(const TextRecords& records, torch::Tensor targets, const BertTokenizer& tokenizer,
                       std::int64_t max_length);

  std::int64_t size() const override { return static_cast<std::int64_t>(encodings_.size()); }
  Example get(std::int64_t index) const override;
  /// The tokens of the encoding (special tokens included).
  std::int64_t length(std::int64_t index) const override;

  const Encoding& encoding(std::int64_t index) const;
  /// Label ids in record order (for metrics over a whole split); empty when the targets are
  /// not class ids.
  const std::vector<std::int64_t>& labels() const { return labels_; }
  /// Every record's target, row by row (int64 [N], float [N] or float [N, L]).
  const torch::Tensor& targets() const { return targets_; }

 private:
  std::vector<Encoding> encodings_;
  torch::Tensor targets_;
  std::vector<std::int64_t> labels_;
};

}  // namespace tenax::sdk
