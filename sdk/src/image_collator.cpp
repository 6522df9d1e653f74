#include "tenax/sdk/image_collator.h"

#include <string>

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

Batch stack_image_batch(const std::vector<Example>& examples) {
  if (examples.empty()) throw Error("image collator: empty batch");
  std::vector<torch::Tensor> images, labels;
  for (const Example& e : examples) {
    if (!e.input.defined() || e.input.dim() != 3 || e.input.sizes() != examples.front().input.sizes()) {
      throw Error(
          "image collator: every image must be [channels, height, width] of one shape (resize them with "
          "ViTImageProcessor); example " +
          std::to_string(images.size()) + " is not");
    }
    images.push_back(e.input);
    if (e.label.defined()) labels.push_back(e.label);
  }
  Batch batch;
  batch.pixel_values = torch::stack(images);
  if (!labels.empty()) {
    if (labels.size() != examples.size()) throw Error("image collator: some examples have a label, some not");
    batch.labels = torch::stack(labels);
  }
  return batch;
}

Collator image_collator() { return &stack_image_batch; }

}  // namespace tenax::sdk
