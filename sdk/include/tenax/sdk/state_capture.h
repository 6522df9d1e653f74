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

/// Whether captured optimizer state is copied or returned as views of the live state (which the
/// next optimizer step changes; the Checkpointer snapshots what it writes, so it takes views).
enum class Capture { kCopy, kView };

/// A copy of the default CPU generator's state (a uint8 tensor).
torch::Tensor capture_cpu_rng_state();
/// Restores the default CPU generator; throws StorageError when the state is malformed.
void restore_cpu_rng_state(const torch::Tensor& state);

/// "optim/<name>/exp_avg", "optim/<name>/exp_avg_sq", "optim/<name>/step" for every parameter
/// with state, in the order of `named_params`.
NamedTensors capture_adamw_state(torch::optim::AdamW& optimizer, const NamedTensors& named_params,
                                 Capture capture = Capture::kCopy);

/// The names under which rank `rank` saves its generators: "rng/rank<r>/cpu", and
/// "rng/rank<r>/cuda<d>" for each CUDA device.
std::string cpu_rng_name(int rank);
std::string cuda_rng_name(int rank, int device);

/// This rank's generator states: the CPU one and one per visible CUDA device (none on a
/// CPU-only build or machine), under the names above.
NamedTensors capture_rng_states(int rank);
/// Restores what capture_rng_states saved for `rank`. Returns false, changing nothing, when
/// `lookup` has no CPU state for `rank` (a checkpoint written by a smaller world); the caller
/// then derives one. A saved CUDA state for a device this process does not have is ignored.
bool restore_rng_states(int rank, const std::function<torch::Tensor(const std::string&)>& lookup);

/// Restores what capture_adamw_state produced. `lookup(name)` returns the saved tensor or an
/// undefined tensor when absent; a parameter with no saved state keeps none.
void restore_adamw_state(torch::optim::AdamW& optimizer, const NamedTensors& named_params,
                         const std::function<torch::Tensor(const std::string&)>& lookup);

}  // namespace tenax::sdk
