// The built-in MLP: Linear layers with an activation between them.
#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "arrays.h"
#include "embedded_model.h"
#include "error_boundary.h"

namespace tenax::capi {
namespace {

torch::nn::AnyModule activation_module(const std::string& name) {
  if (name == "relu") return torch::nn::AnyModule(torch::nn::ReLU());
  if (name == "tanh") return torch::nn::AnyModule(torch::nn::Tanh());
  if (name == "gelu") return torch::nn::AnyModule(torch::nn::GELU());
  throw InvalidArgument("activation: '" + name + "' is not one of relu, tanh, gelu");
}

class Mlp : public EmbeddedModel {
 public:
  Mlp(const std::vector<std::int64_t>& widths, const std::string& activation, tenax_loss loss)
      : widths_(widths), loss_(loss) {
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      if (i > 0) layers_->push_back(activation_module(activation));
      layers_->push_back(torch::nn::Linear(widths[i], widths[i + 1]));
    }
    register_module("layers", layers_);
  }

  sdk::ModelOutput forward(const sdk::Batch& batch) override {
    sdk::ModelOutput out;
    out.logits = layers_->forward(batch.inputs);
    if (batch.labels.defined()) out.loss = loss_of(loss_, out.logits, batch.labels);
    return out;
  }

  sdk::Batch make_batch(const torch::Tensor& input, const torch::Tensor& label) const override {
    sdk::Batch batch = float_batch(input, label, loss_, widths_.front());
    if (label.defined() && loss_ == TENAX_LOSS_MSE && (label.dim() != 2 || label.size(1) != widths_.back())) {
      throw InvalidArgument("label: shape " + shape_string(label.sizes()) +
                            " (batch first) but this model outputs {batch, " + std::to_string(widths_.back()) + "}");
    }
    return batch;
  }

  // torch::nn::Linear's own initialisation (kaiming_uniform with a = sqrt(5), i.e. U(-1/sqrt(fan_in),
  // 1/sqrt(fan_in)) for weight and bias), but drawn from a generator of its own seeded with `seed`:
  // the same weights for the same seed, and the process's default generator is left alone.
  void initialize(std::uint64_t seed) override {
    torch::NoGradGuard no_grad;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (const auto& layer : layers_->children()) {
      auto* linear = layer->as<torch::nn::LinearImpl>();
      if (linear == nullptr) continue;
      const double bound = 1.0 / std::sqrt(static_cast<double>(linear->options.in_features()));
      linear->weight.uniform_(-bound, bound, generator);
      linear->bias.uniform_(-bound, bound, generator);
    }
  }

 private:
  std::vector<std::int64_t> widths_;
  tenax_loss loss_;
  torch::nn::Sequential layers_;
};

}  // namespace

std::shared_ptr<EmbeddedModel> make_mlp(const std::vector<std::int64_t>& widths, const std::string& activation,
                                        tenax_loss loss) {
  if (widths.size() < 2) {
    throw InvalidArgument("widths: " + std::to_string(widths.size()) +
                          " widths; an MLP needs at least 2 (inputs, outputs)");
  }
  for (size_t i = 0; i < widths.size(); ++i) {
    if (widths[i] < 1) {
      throw InvalidArgument("widths: widths[" + std::to_string(i) + "] is " + std::to_string(widths[i]) +
                            "; every layer needs at least 1 unit");
    }
  }
  if (loss == TENAX_LOSS_CROSS_ENTROPY && widths.back() < 2) {
    throw InvalidArgument("widths: the last width is " + std::to_string(widths.back()) +
                          "; TENAX_LOSS_CROSS_ENTROPY needs at least 2 class logits");
  }
  auto model = std::make_shared<Mlp>(widths, activation, loss);
  model->initialize(0);  // usable before a trainer exists; the trainer's seed redraws it
  return model;
}

}  // namespace tenax::capi
