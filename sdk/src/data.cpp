#include "tenax/sdk/data.h"

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

std::int64_t Batch::size() const {
  if (labels.defined()) return labels.size(0);
  if (inputs.defined()) return inputs.size(0);
  if (input_ids.defined()) return input_ids.size(0);
  return 0;
}

Batch stack_collator(const std::vector<Example>& examples) {
  if (examples.empty()) throw Error("stack_collator: empty batch");
  std::vector<torch::Tensor> inputs, labels;
  inputs.reserve(examples.size());
  labels.reserve(examples.size());
  for (const Example& e : examples) {
    inputs.push_back(e.input);
    labels.push_back(e.label);
  }
  Batch batch;
  batch.inputs = torch::stack(inputs);
  batch.labels = torch::stack(labels);
  return batch;
}

}  // namespace tenax::sdk
