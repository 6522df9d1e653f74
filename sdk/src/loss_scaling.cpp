#include "loss_scaling.h"

#include <cmath>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "tenax/core/error.h"

namespace tenax::sdk {

nlohmann::json LossScaleState::to_json() const {
  return {{"scale", scale}, {"growth_tracker", growth_tracker}, {"skipped_steps", skipped_steps}};
}

LossScaleState LossScaleState::from_json(const nlohmann::json& json) {
  const auto number = [&](const char* key) -> const nlohmann::json& {
    if (!json.is_object() || !json.contains(key) || !json.at(key).is_number()) {
      throw StorageError(std::string("the checkpoint's loss_scale has no number '") + key + "': " + json.dump());
    }
    return json.at(key);
  };
  LossScaleState state;
  state.scale = number("scale").get<double>();
  state.growth_tracker = number("growth_tracker").get<std::int64_t>();
  state.skipped_steps = number("skipped_steps").get<std::int64_t>();
  if (!(state.scale > 0) || !std::isfinite(state.scale) || state.growth_tracker < 0 || state.skipped_steps < 0) {
    throw StorageError("the checkpoint's loss_scale is out of range: " + json.dump());
  }
  return state;
}

namespace detail {

bool unscale_gradients(const std::vector<torch::Tensor>& params, double scale) {
  torch::NoGradGuard no_grad;
  // torch computes the reciprocal in double, then rounds it to float32.
  const float inv_scale = static_cast<float>(1.0 / static_cast<double>(static_cast<float>(scale)));
  // One flag per gradient, read once: a read per tensor would wait for the device each time.
  std::vector<torch::Tensor> finite;
  for (const torch::Tensor& p : params) {
    torch::Tensor g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inv_scale);
    finite.push_back(torch::isfinite(g).all());
  }
  return !finite.empty() && !torch::stack(finite).all().item<bool>();
}

LossScaleState next_loss_scale(const LossScaleState& state, bool found_inf, const GradScalerOptions& options) {
  LossScaleState next = state;
  const float scale = static_cast<float>(state.scale);  // torch keeps it in a float32 tensor
  next.scale = scale;
  if (found_inf) {
    next.scale = scale * static_cast<float>(options.backoff_factor);
    next.growth_tracker = 0;
    ++next.skipped_steps;
    return next;
  }
  const std::int64_t successful = state.growth_tracker + 1;
  if (successful == options.growth_interval) {
    const float grown = scale * static_cast<float>(options.growth_factor);
    // A scale that would overflow float32 stays where it is (torch's kernel).
    if (std::isfinite(grown)) next.scale = grown;
    next.growth_tracker = 0;
  } else {
    next.growth_tracker = successful;
  }
  return next;
}

}  // namespace detail
}  // namespace tenax::sdk
