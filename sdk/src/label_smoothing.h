// transformers' LabelSmoother (trainer_pt_utils.py), the loss the Trainer uses when
// TrainingArguments::label_smoothing_factor > 0: (1 - epsilon) x the negative log-likelihood of
// the label + epsilon x the mean negative log-probability over the classes, averaged over the
// labels that are not ignore_index (-100). For sequence classification this equals
// cross_entropy(label_smoothing = epsilon); the arithmetic follows LabelSmoother's so that the
// goldens of tools/goldens/label_smoothing_goldens.py hold to the last bits.
// Thread-safety: a pure function.
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace tenax::sdk::detail {

/// `logits` [..., classes]; `labels` integer, with the shape of `logits` less its last
/// dimension. Throws ConfigError when the labels are not integers (regression or multi-label
/// targets, which label smoothing does not apply to).
torch::Tensor label_smoothed_loss(const torch::Tensor& logits, const torch::Tensor& labels, double epsilon,
                                  std::int64_t ignore_index = -100);

}  // namespace tenax::sdk::detail
