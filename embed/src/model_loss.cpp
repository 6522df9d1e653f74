#include <torch/torch.h>

#include "arrays.h"
#include "embedded_model.h"
#include "error_boundary.h"

namespace tenax::capi {

tenax_loss checked_loss(int64_t loss, const char* argument) {
  if (loss == TENAX_LOSS_MSE || loss == TENAX_LOSS_CROSS_ENTROPY) return static_cast<tenax_loss>(loss);
  throw InvalidArgument(std::string(argument) + ": " + std::to_string(loss) +
                        " is not a tenax_loss (TENAX_LOSS_MSE, TENAX_LOSS_CROSS_ENTROPY)");
}

torch::Tensor loss_of(tenax_loss loss, const torch::Tensor& logits, const torch::Tensor& labels) {
  if (loss == TENAX_LOSS_MSE) {
    if (labels.sizes() != logits.sizes()) {
      throw InvalidArgument("label: shape " + shape_string(labels.sizes()) +
                            " (batch first) but the model's output is " + shape_string(logits.sizes()) +
                            "; TENAX_LOSS_MSE needs a label of the output's shape");
    }
    return torch::mse_loss(logits, labels);
  }
  if (logits.dim() != 2 || labels.dim() != 1 || labels.size(0) != logits.size(0)) {
    throw InvalidArgument("label: shape " + shape_string(labels.sizes()) + " for class logits " +
                          shape_string(logits.sizes()) + "; TENAX_LOSS_CROSS_ENTROPY needs {batch} class indices");
  }
  return torch::cross_entropy_loss(logits, labels);
}

sdk::Batch float_batch(const torch::Tensor& input, const torch::Tensor& label, tenax_loss loss, std::int64_t features) {
  sdk::Batch batch;
  batch.inputs = as_float32(input, "input");
  if (features >= 0 && (input.dim() != 2 || input.size(1) != features)) {
    throw InvalidArgument("input: shape " + shape_string(input.sizes()) +
                          " (batch first) but this model takes {batch, " + std::to_string(features) +
                          "} (TENAX_ORDER_F: {" + std::to_string(features) + ", batch})");
  }
  if (!label.defined()) return batch;
  if (label.size(0) != input.size(0)) {
    throw InvalidArgument("label: batch of " + std::to_string(label.size(0)) + " rows but input has " +
                          std::to_string(input.size(0)) +
                          " (the batch is the first C dimension, the last Fortran one)");
  }
  if (loss == TENAX_LOSS_MSE) {
    batch.labels = as_float32(label, "label");
  } else {
    if (label.scalar_type() != torch::kInt64) {
      const char* dtype = label.scalar_type() == torch::kFloat32 ? "TENAX_FLOAT32" : "TENAX_FLOAT64";
      throw InvalidArgument(std::string("label: dtype ") + dtype +
                            "; TENAX_LOSS_CROSS_ENTROPY needs TENAX_INT64 class indices");
    }
    batch.labels = label;
  }
  return batch;
}

}  // namespace tenax::capi
