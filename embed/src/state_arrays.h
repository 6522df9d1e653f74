// The caller's arrays as user state of the checkpoint (sdk::UserState).
//
// float32 and int64 arrays are registered as tensors over the caller's memory (restored in
// place, shape and dtype checked by UserState). The checkpoint's storage has no float64, and a
// simulation's fields are float64: those go in as byte blobs that carry their own
// "float64 {4, 3}" header, so a restore into an array of another shape is still refused
// by name rather than read as whatever bytes fit.
// Thread-safety: training thread only (as UserState).
#pragma once

#include <string>

#include <torch/types.h>

#include "tenax/sdk/user_state.h"

namespace tenax::capi {

/// Registers `array` (a view of the caller's memory) under `name`.
void register_array(sdk::UserState& state, const std::string& name, const torch::Tensor& array,
                    sdk::UserState::Scope scope);

}  // namespace tenax::capi
