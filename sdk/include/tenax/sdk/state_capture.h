// Capture and restore of the state that bit-exact resume needs beyond the parameters:
// the CPU random generator and the optimizer's per-parameter state (AdamW's moments, SGD's
// momentum, Adafactor's factored moments), keyed by parameter *name*
// in a fixed order (DESIGN.md decision 5) — never by pointer or map order.
// Thread-safety: training thread only; the generator's mutex is held while touching it.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>
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

/// "AdamW", "SGD" or "Adafactor" (libtorch's AdamW and SGD, subclasses included, and
/// tenax::sdk::Adafactor): the optimizers whose state the functions below capture; nullptr for
/// any other.
const char* checkpointable_optimizer_name(const torch::optim::Optimizer& optimizer);

/// "optim/<name>/<key>" for every parameter with state, in the order of `named_params`:
///   AdamW      exp_avg, exp_avg_sq, step (and max_exp_avg_sq with amsgrad)
///   SGD        momentum_buffer (none without momentum)
///   Adafactor  step, exp_avg_sq_row and exp_avg_sq_col (two or more dimensions) or exp_avg_sq,
///              exp_avg with beta1
/// Throws ConfigError for another optimizer's state.
NamedTensors capture_optimizer_state(torch::optim::Optimizer& optimizer, const NamedTensors& named_params,
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

/// Restores what capture_optimizer_state produced into an optimizer of the same kind. `lookup(name)`
/// returns the saved tensor or an undefined tensor when absent; a parameter with no saved state
/// keeps none. Throws StorageError naming the parameter and key for incomplete or misshapen
/// state, ConfigError for an optimizer checkpointable_optimizer_name does not know.
void restore_optimizer_state(torch::optim::Optimizer& optimizer, const NamedTensors& named_params,
                             const std::function<torch::Tensor(const std::string&)>& lookup);

}  // namespace tenax::sdk
