#include "tenax/sdk/autocast.h"

#include <ATen/autocast_mode.h>

#include "tenax/core/error.h"
#include "torch_compat.h"

namespace tenax::sdk {

AutocastGuard::AutocastGuard(torch::DeviceType device, bool enabled, torch::ScalarType dtype)
    : device_(device), active_(enabled) {
  if (!active_) return;
  if (device != torch::kCPU && device != torch::kCUDA) {
    throw ConfigError(std::string("TrainingArguments.") + (dtype == torch::kHalf ? "fp16" : "bf16") +
                      ": autocast is supported on cpu and cuda, not " + c10::DeviceTypeName(device));
  }
  previous_enabled_ = compat::autocast_enabled(device);
  previous_dtype_ = compat::autocast_dtype(device);
  compat::set_autocast_enabled(device, true);
  compat::set_autocast_dtype(device, dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  // Casts cached for this region are dropped when the outermost region ends (as in Python).
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  compat::set_autocast_enabled(device_, previous_enabled_);
  compat::set_autocast_dtype(device_, previous_dtype_);
}

}  // namespace tenax::sdk
