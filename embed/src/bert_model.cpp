// A Hugging Face BERT directory as a C API model: int64 token ids in, class logits out.
#include <algorithm>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "arrays.h"
#include "embedded_model.h"
#include "error_boundary.h"
#include "tenax/sdk/models/bert.h"

namespace tenax::capi {
namespace {

class BertClassifier : public EmbeddedModel {
 public:
  explicit BertClassifier(std::shared_ptr<sdk::BertForSequenceClassification> bert)
      : bert_(register_module("model", std::move(bert))) {}

  sdk::ModelOutput forward(const sdk::Batch& batch) override { return bert_->forward(batch); }

  sdk::Batch make_batch(const torch::Tensor& input, const torch::Tensor& label) const override {
    if (input.scalar_type() != torch::kInt64 || input.dim() != 2) {
      throw InvalidArgument("input: shape " + shape_string(input.sizes()) + " of " +
                            std::string(input.scalar_type() == torch::kInt64 ? "TENAX_INT64" : "floats") +
                            "; a BERT model takes TENAX_INT64 token ids {batch, seq} (TENAX_ORDER_F: {seq, batch})");
    }
    sdk::Batch batch;
    batch.input_ids = input;
    if (!label.defined()) return batch;
    if (label.scalar_type() != torch::kInt64 || label.dim() != 1 || label.size(0) != input.size(0)) {
      throw InvalidArgument("label: shape " + shape_string(label.sizes()) + "; a BERT classifier takes " +
                            "TENAX_INT64 class indices {" + std::to_string(input.size(0)) + "} (one per input row)");
    }
    batch.labels = label;
    return batch;
  }

  // The classification head is new unless the directory had one: draw it from the trainer's
  // seed (normal(0, initializer_range), zero bias, as transformers does) so two runs agree.
  void initialize(std::uint64_t seed) override {
    const auto& missing = bert_->loading_info().missing_keys;
    if (std::find(missing.begin(), missing.end(), "classifier.weight") == missing.end()) return;
    torch::NoGradGuard no_grad;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    auto parameters = bert_->named_parameters();
    parameters["classifier.weight"].normal_(0.0, bert_->config().initializer_range, generator);
    parameters["classifier.bias"].zero_();
  }

 private:
  std::shared_ptr<sdk::BertForSequenceClassification> bert_;
};

}  // namespace

std::shared_ptr<EmbeddedModel> load_bert(const std::filesystem::path& directory, std::int64_t num_labels) {
  if (num_labels < 2) {
    throw InvalidArgument("num_labels: " + std::to_string(num_labels) +
                          "; the cross-entropy classifier needs at least 2 classes");
  }
  auto bert = sdk::BertForSequenceClassification::from_pretrained(
      directory,
      sdk::BertPretrainedOptions().num_labels(num_labels).problem_type(sdk::ProblemType::kSingleLabelClassification));
  return std::make_shared<BertClassifier>(std::move(bert));
}

}  // namespace tenax::capi
