// What Trainer::predict and Trainer::evaluate return, in the shape of transformers'
// PredictionOutput / EvalPrediction, and the compute_metrics hook evaluate() takes.
//
// predictions and label_ids hold one row per dataset sample, in dataset order, on every rank
// (predict gathers them across ranks). Metrics carry the run's prefix ("eval_loss",
// "test_accuracy", ...).
// Thread-safety: plain values.
//
//   ComputeMetrics accuracy_of = [](const PredictionOutput& p) {
//     return Logs{{"accuracy", tenax::sdk::accuracy(p.label_id_vector(), p.argmax_vector())}};
//   };
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <torch/types.h>

namespace tenax::sdk {

/// One micro-batch's result of Trainer::prediction_step (transformers: (loss, logits, labels)).
struct PredictionStepOutput {
  torch::Tensor loss;    ///< scalar mean over the batch; undefined without labels
  torch::Tensor logits;  ///< [B, ...], detached
  torch::Tensor labels;  ///< [B, ...]; undefined without labels
};

struct PredictionOutput {
  torch::Tensor predictions;  ///< the model's logits, [N, ...] in dataset order (CPU)
  torch::Tensor label_ids;    ///< [N, ...] in dataset order (CPU); undefined without labels
  std::map<std::string, double> metrics;

  /// argmax over the last dimension of `predictions`, as int64 ids (classification).
  std::vector<std::int64_t> argmax_vector() const;
  /// label_ids as int64 ids; throws tenax::Error when there are none.
  std::vector<std::int64_t> label_id_vector() const;
};

/// Computes named metrics (without prefix: {"accuracy": ...}) from the gathered predictions.
/// Called on every rank with the same input.
using ComputeMetrics = std::function<std::map<std::string, double>(const PredictionOutput&)>;

}  // namespace tenax::sdk
