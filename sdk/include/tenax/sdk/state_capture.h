// Capture and restore of the state that bit-exact resume needs beyond the parameters:
// the CPU random generator and AdamW's per-parameter moments, keyed by parameter *name*
// in a fixed order (DESIGN.md decision 5) — never by pointer or map order.
// Thread-safety: training thread only; the generator's mutex is held while touching it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/adamw.h>
#include <torch/types.h>

namespace tenax::sdk {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

/// A copy of the default CPU generator's state (a uint8 tensor).
torch::Tensor capture_cpu_rng_state();
/// Restores the default CPU generator; throws StorageError when the state is malformed.
void restore_cpu_rng_state(const torch::Tensor& state);

/// "optim/<name>/exp_avg", "optim/<name>/exp_avg_sq", "optim/<name>/step" for every parameter
/// with state, in the order of `named_params`.
NamedTensors capture_adamw_state(torch::optim::AdamW& optimizer, const NamedTensors& named_params);

/// Restores what capture_adamw_state produced. `lookup(name)` returns the saved tensor or an
/// undefined tensor when absent; a parameter with no saved state keeps none.
void restore_adamw_state(torch::optim::AdamW& optimizer, const NamedTensors& named_params,
                         const std::function<torch::Tensor(const std::string&)>& lookup);

}  // namespace tenax::sdk
