#include "tenax/sdk/prediction.h"

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {
namespace {

std::vector<std::int64_t> to_vector(const torch::Tensor& ids) {
  const torch::Tensor flat = ids.to(torch::kCPU, torch::kInt64).contiguous().view({-1});
  const auto* p = flat.data_ptr<std::int64_t>();
  return {p, p + flat.numel()};
}

}  // namespace

std::vector<std::int64_t> PredictionOutput::argmax_vector() const {
  if (!predictions.defined() || predictions.dim() < 1)
    throw Error("PredictionOutput: no predictions to take argmax of");
  return to_vector(predictions.argmax(-1));
}

std::vector<std::int64_t> PredictionOutput::label_id_vector() const {
  if (!label_ids.defined()) throw Error("PredictionOutput: no label ids (the dataset's batches carried no labels)");
  return to_vector(label_ids);
}

}  // namespace tenax::sdk
