// The loss of every sequence / image classification head, as transformers computes it.
// Private to sdk/. Thread-safety: mutates `config` (the model's own, on its training thread).
#pragma once

#include <torch/types.h>

#include "tenax/sdk/models/pretrained_config.h"

namespace tenax::sdk::detail {

/// regression (num_labels 1 or problem_type regression): MSE(logits, float labels);
/// single_label_classification (int64/int32 labels): cross-entropy;
/// multi_label_classification (float labels, num_labels > 1): BCE with logits.
/// An unset config.problem_type is decided here, at the first call, and kept in `config` (so
/// save_pretrained writes it), exactly as transformers does.
torch::Tensor classification_loss(PretrainedConfig& config, const torch::Tensor& logits, const torch::Tensor& labels);

}  // namespace tenax::sdk::detail
