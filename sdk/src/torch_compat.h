// The one place that knows which libtorch we build against (DESIGN.md decision 2).
// Debian's libtorch 1.13 (CPU, CI) and torch 2.x (GPU build) differ in a few APIs; every
// difference Tenax meets is absorbed here and nowhere else tests the torch version.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <ATen/autocast_mode.h>

namespace tenax::compat {

#if TORCH_VERSION_MAJOR < 2
/// Key of a parameter in torch::optim::Optimizer::state(): a stringified TensorImpl pointer in 1.x.
inline std::string optimizer_state_key(const torch::Tensor& param) {
  return c10::guts::to_string(param.unsafeGetTensorImpl());
}
#else
/// Key of a parameter in torch::optim::Optimizer::state(): the TensorImpl pointer in 2.x.
inline void* optimizer_state_key(const torch::Tensor& param) { return param.unsafeGetTensorImpl(); }
#endif

/// Owning pointer to an autograd node, as torch::autograd::impl::grad_accumulator returns it:
/// std::shared_ptr<Node> in 1.13 (and 2.11), c10::intrusive_ptr<Node> in 2.15. Taken from the
/// function itself rather than from a version test.
using NodePtr = decltype(torch::autograd::impl::grad_accumulator(std::declval<const torch::Tensor&>()));

/// Gives `optimizer`'s parameter groups back the options of `as_given` (the groups it was built
/// from, in order; a group without options keeps what it got). torch 2.15's
/// Optimizer::add_param_group merges a group's options into the optimizer's defaults: a field
/// equal to its options class's constructor default (SGDOptions' weight_decay 0, a no-decay
/// group's) takes the defaults' value, and the options of a class torch does not know (Tenax's
/// AdafactorOptions) are dropped for the defaults. 1.13 keeps each group's options as given;
/// putting them back is right on both, so no version test.
inline void keep_group_options(torch::optim::Optimizer& optimizer,
                               const std::vector<torch::optim::OptimizerParamGroup>& as_given) {
  std::vector<torch::optim::OptimizerParamGroup>& groups = optimizer.param_groups();
  for (std::size_t i = 0; i < as_given.size() && i < groups.size(); ++i) {
    if (as_given[i].has_options()) groups[i].set_options(as_given[i].options().clone());
  }
}

/// `Optim(groups, defaults)` with each group keeping the options it came with (keep_group_options).
template <typename Optim, typename Options>
std::unique_ptr<Optim> make_optimizer(const std::vector<torch::optim::OptimizerParamGroup>& groups, Options defaults) {
  auto optimizer = std::make_unique<Optim>(groups, std::move(defaults));
  keep_group_options(*optimizer, groups);
  return optimizer;
}

// Autocast state of one device type (CPU or CUDA). torch 2.4 replaced the per-device functions
// (deprecated there, an error under -Werror) by ones taking the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
/// Whether CPU autocast runs in float16 (added with the per-device functions; 1.13's CPU autocast
/// knows bfloat16 only, and its CPU matmuls have no float16 kernels).
inline constexpr bool kCpuFloat16Autocast = true;
inline bool autocast_enabled(at::DeviceType d) { return at::autocast::is_autocast_enabled(d); }
inline void set_autocast_enabled(at::DeviceType d, bool on) { at::autocast::set_autocast_enabled(d, on); }
inline at::ScalarType autocast_dtype(at::DeviceType d) { return at::autocast::get_autocast_dtype(d); }
inline void set_autocast_dtype(at::DeviceType d, at::ScalarType t) { at::autocast::set_autocast_dtype(d, t); }
#else
inline constexpr bool kCpuFloat16Autocast = false;
inline bool autocast_enabled(at::DeviceType d) {
  return d == at::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
inline void set_autocast_enabled(at::DeviceType d, bool on) {
  if (d == at::kCPU)
    at::autocast::set_cpu_enabled(on);
  else
    at::autocast::set_enabled(on);
}
inline at::ScalarType autocast_dtype(at::DeviceType d) {
  return d == at::kCPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
}
inline void set_autocast_dtype(at::DeviceType d, at::ScalarType t) {
  if (d == at::kCPU)
    at::autocast::set_autocast_cpu_dtype(t);
  else
    at::autocast::set_autocast_gpu_dtype(t);
}
#endif

}  // namespace tenax::compat
