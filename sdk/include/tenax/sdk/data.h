// Datasets, examples, batches and collation.
//
// A Dataset is random access by index (the ResumableSampler decides the order). A Collator
// turns the examples of one rank's batch into a Batch of tensors.
// Thread-safety: Dataset::get must be safe to call concurrently (it is const).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

namespace tenax::sdk {

/// One training example: model input and its label (shapes are the model's business).
struct Example {
  torch::Tensor input;
  torch::Tensor label;
};

/// One rank's micro-batch: a field per input modality, named as transformers names the model
/// inputs, so that every family of a modality reads the same fields (no field per model).
/// Text models read input_ids/attention_mask/token_type_ids, vision models pixel_values, dense
/// models `inputs`; an input no modality field covers goes into `extra` under its transformers
/// name. Every tensor's first dimension is the batch.
struct Batch {
  torch::Tensor inputs;          ///< dense models: [batch, ...] float
  torch::Tensor input_ids;       ///< text: [batch, seq] int64
  torch::Tensor attention_mask;  ///< text: [batch, seq], 1 token, 0 padding
  torch::Tensor token_type_ids;  ///< text: [batch, seq] int64
  torch::Tensor pixel_values;    ///< images: [batch, channels, height, width] float
  torch::Tensor labels;          ///< [batch] or [batch, n]; undefined when there is no loss
  /// Further inputs by transformers name (e.g. "bbox", "pixel_mask"), for a family whose
  /// inputs the fields above do not cover.
  std::map<std::string, torch::Tensor> extra;

  /// The batch dimension of the first defined tensor (labels, inputs, input_ids, pixel_values,
  /// then extra); 0 when none is.
  std::int64_t size() const;
  /// A batch holding `fn(t)` for every defined tensor t (fields and extra alike), the others
  /// left undefined: for what treats all inputs the same (splitting into micro-batches, moving
  /// to a device) without naming them.
  Batch map(const std::function<torch::Tensor(const torch::Tensor&)>& fn) const;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  virtual Example get(std::int64_t index) const = 0;
  /// The sample as training epoch `epoch` sees it: by default get(index). A dataset with random
  /// augmentation draws it from (its seed, epoch, index) here, so that each epoch differs and a
  /// resumed run draws the same. The Trainer's training loop calls this; evaluation calls get().
  virtual Example get_for_epoch(std::int64_t index, std::int64_t /*epoch*/) const { return get(index); }
  /// The sample's length for group_by_length: by default the size of the last dimension of
  /// get(index).input (a text example's tokens). A dataset that knows it cheaper overrides it.
  virtual std::int64_t length(std::int64_t index) const;
};

using Collator = std::function<Batch(const std::vector<Example>&)>;

/// Stacks equally shaped inputs into Batch::inputs and labels into Batch::labels.
Batch stack_collator(const std::vector<Example>& examples);

}  // namespace tenax::sdk
