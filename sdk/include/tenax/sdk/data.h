// Datasets, examples, batches and collation.
//
// A Dataset is random access by index (the ResumableSampler decides the order). A Collator
// turns the examples of one rank's batch into a Batch of tensors.
// Thread-safety: Dataset::get must be safe to call concurrently (it is const).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

namespace tenax::sdk {

/// One training example: model input and its label (shapes are the model's business).
struct Example {
  torch::Tensor input;
  torch::Tensor label;
};

/// One rank's micro-batch. Text models fill input_ids/attention_mask/token_type_ids;
/// dense models fill `inputs`.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor input_ids;
  torch::Tensor attention_mask;
  torch::Tensor token_type_ids;
  torch::Tensor labels;
  std::int64_t size() const;
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual std::int64_t size() const = 0;
  virtual Example get(std::int64_t index) const = 0;
};

using Collator = std::function<Batch(const std::vector<Example>&)>;

/// Stacks equally shaped inputs into Batch::inputs and labels into Batch::labels.
Batch stack_collator(const std::vector<Example>& examples);

}  // namespace tenax::sdk
