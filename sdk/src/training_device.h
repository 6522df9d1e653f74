// Which device a rank trains on, by transformers' rule: cuda:<local rank> when libtorch sees
// CUDA devices (and use_cpu is off), else the CPU. One rank per GPU: a local rank without a
// device of its own is a configuration error, not two ranks sharing one GPU by accident.
// Thread-safety: pure functions.
//
//   const torch::Device device = training_device(args.use_cpu, id.local_rank, id.local_world_size,
//                                                torch::cuda::device_count());
#pragma once

#include <cstddef>

#include <torch/types.h>

#include "tenax/sdk/data.h"

namespace tenax::sdk {

/// Throws ConfigError naming the local rank, the devices visible and the fixes.
torch::Device training_device(bool use_cpu, int local_rank, int local_world_size, std::size_t cuda_devices);

/// `batch` with every tensor on `device` (host-to-device copies are asynchronous on CUDA).
Batch batch_on(const Batch& batch, const torch::Device& device);

}  // namespace tenax::sdk
