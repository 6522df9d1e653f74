#include "tenax/sdk/text_collator.h"

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

Batch pad_text_batch(const std::vector<Example>& examples, std::int64_t pad_id) {
  if (examples.empty()) throw Error("pad_text_batch: empty batch");
  std::int64_t longest = 0;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    const torch::Tensor& in = examples[i].input;
    const bool ok =
        in.defined() && in.scalar_type() == torch::kInt64 && (in.dim() == 1 || (in.dim() == 2 && in.size(0) == 2));
    if (!ok) {
      throw Error("pad_text_batch: example " + std::to_string(i) +
                  ": input must be int64 [L] (ids) or [2, L] (ids, token types), as "
                  "TokenizedTextDataset makes them");
    }
    longest = std::max(longest, in.size(-1));
  }
  const auto batch_size = static_cast<std::int64_t>(examples.size());
  Batch batch;
  batch.input_ids = torch::full({batch_size, longest}, pad_id, torch::kInt64);
  batch.attention_mask = torch::zeros({batch_size, longest}, torch::kInt64);
  batch.token_type_ids = torch::zeros({batch_size, longest}, torch::kInt64);
  std::vector<torch::Tensor> labels;
  for (std::int64_t b = 0; b < batch_size; ++b) {
    const Example& ex = examples[static_cast<std::size_t>(b)];
    const std::int64_t length = ex.input.size(-1);
    using torch::indexing::Slice;
    if (ex.input.dim() == 1) {
      batch.input_ids.index_put_({b, Slice(0, length)}, ex.input);
    } else {
      batch.input_ids.index_put_({b, Slice(0, length)}, ex.input[0]);
      batch.token_type_ids.index_put_({b, Slice(0, length)}, ex.input[1]);
    }
    batch.attention_mask.index_put_({b, Slice(0, length)}, 1);
    // Class ids become int64 scalars; float targets (regression, multi-hot rows) keep their
    // shape, as the loss reads them (classification_loss.h).
    if (ex.label.defined()) {
      labels.push_back(ex.label.is_floating_point() ? ex.label.to(torch::kFloat32)
                                                    : ex.label.to(torch::kInt64).reshape({}));
    }
  }
  if (!labels.empty()) {
    if (labels.size() != examples.size()) {
      throw Error("pad_text_batch: some examples have a label and some do not");
    }
    batch.labels = torch::stack(labels);
  }
  return batch;
}

Collator text_collator(std::int64_t pad_id) {
  return [pad_id](const std::vector<Example>& examples) { return pad_text_batch(examples, pad_id); };
}

}  // namespace tenax::sdk
