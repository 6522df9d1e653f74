// AutocastGuard: mixed precision (bf16 by default, or fp16) for the forward pass of one scope, on the
// CPU or on CUDA, as `with torch.autocast(device_type, dtype)` does in Python. Master weights
// and gradients stay float32; only eligible ops (matmul, linear, ...) run in the lower
// precision. The previous autocast state of that device is restored on exit, also when the
// scope throws, so guards nest. Run backward() outside the guard, as PyTorch recommends.
// Thread-safety: autocast state is per thread; the guard affects only the calling thread.
//
//   {
//     tenax::sdk::AutocastGuard bf16(torch::kCPU, /*enabled=*/args.bf16);
//     loss = model.forward(batch).loss;
//   }
//   loss.backward();
#pragma once

#include <torch/types.h>

namespace tenax::sdk {

class AutocastGuard {
 public:
  /// `enabled` false makes the guard a no-op (so call sites need no branch). Throws
  /// ConfigError for a device other than CPU or CUDA.
  AutocastGuard(torch::DeviceType device, bool enabled, torch::ScalarType dtype = torch::kBFloat16);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  torch::DeviceType device_;
  bool active_;
  bool previous_enabled_ = false;
  torch::ScalarType previous_dtype_ = torch::kBFloat16;
};

}  // namespace tenax::sdk
