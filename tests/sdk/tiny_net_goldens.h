// What the optimizer goldens' replays share (adamw_golden_test.cpp, optimizer_goldens_test.cpp):
// tools/goldens/schedule_goldens.py's TinyNet, with the same module names and order, and the
// goldens' number lists read back as float32 tensors.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "tenax/sdk/state_capture.h"

namespace tenax::sdk::golden_replay {

/// Linear -> tanh -> LayerNorm -> Linear; the LayerNorm's name does not say what it is.
class TinyNet : public torch::nn::Module {
 public:
  TinyNet(std::int64_t in, std::int64_t hidden, std::int64_t out)
      : encoder_(register_module("encoder", torch::nn::Linear(in, hidden))),
        post_(register_module("post", torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden})))),
        head_(register_module("head", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(const torch::Tensor& x) { return head_(post_(torch::tanh(encoder_(x)))); }

 private:
  torch::nn::Linear encoder_;
  torch::nn::LayerNorm post_;
  torch::nn::Linear head_;
};

/// The goldens hold float32 values written as doubles: the conversion back is exact.
inline torch::Tensor float_tensor(const nlohmann::json& values, std::vector<std::int64_t> shape) {
  return torch::tensor(values.get<std::vector<double>>(), torch::kFloat64).to(torch::kFloat32).reshape(shape);
}

inline NamedTensors named_parameters(const torch::nn::Module& model) {
  NamedTensors out;
  for (const auto& item : model.named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

}  // namespace tenax::sdk::golden_replay
