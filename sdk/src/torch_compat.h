// The one place that knows which libtorch we build against (DESIGN.md decision 2).
// Debian's libtorch 1.13 (CPU, CI) and torch 2.x (GPU build) differ in a few APIs; every
// difference Tenax meets is absorbed here and nowhere else tests the torch version.
#pragma once

#include <string>

#include <torch/torch.h>
#include <torch/version.h>

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

}  // namespace tenax::compat
