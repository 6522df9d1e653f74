#include "tenax/sdk/data.h"

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

std::int64_t Dataset::length(std::int64_t index) const {
  const torch::Tensor input = get(index).input;
  return input.defined() && input.dim() > 0 ? input.size(-1) : 1;
}

std::int64_t Batch::size() const {
  if (labels.defined()) return labels.size(0);
  if (inputs.defined()) return inputs.size(0);
  if (input_ids.defined()) return input_ids.size(0);
  if (pixel_values.defined()) return pixel_values.size(0);
  for (const auto& [name, tensor] : extra) {
    if (tensor.defined()) return tensor.size(0);
  }
  return 0;
}

Batch Batch::map(const std::function<torch::Tensor(const torch::Tensor&)>& fn) const {
  Batch out;
  for (torch::Tensor Batch::*field : {&Batch::inputs, &Batch::input_ids, &Batch::attention_mask, &Batch::token_type_ids,
                                      &Batch::pixel_values, &Batch::labels}) {
    if ((this->*field).defined()) out.*field = fn(this->*field);
  }
  for (const auto& [name, tensor] : extra) {
    if (tensor.defined()) out.extra.emplace(name, fn(tensor));
  }
  return out;
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
