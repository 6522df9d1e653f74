#include "training_device.h"

#include <cstdlib>
#include <string>

#include "tenax/core/error.h"

namespace tenax::sdk {

torch::Device training_device(bool use_cpu, int local_rank, int local_world_size, std::size_t cuda_devices) {
  if (use_cpu || cuda_devices == 0) return torch::Device(torch::kCPU);
  if (local_rank < 0 || static_cast<std::size_t>(local_rank) >= cuda_devices) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw ConfigError("local rank " + std::to_string(local_rank) + " of " + std::to_string(local_world_size) +
                      " on this node has no CUDA device of its own: " + std::to_string(cuda_devices) +
                      " visible (CUDA_VISIBLE_DEVICES=" + (visible != nullptr ? visible : "unset") +
                      "). Start one rank per GPU (tenax run --nproc-per-node " + std::to_string(cuda_devices) +
                      ", or sbatch --gpus-per-node), or set use_cpu = true to train on the CPU");
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

Batch batch_on(const Batch& batch, const torch::Device& device) {
  return batch.map([&](const torch::Tensor& t) {
    return t.device() == device ? t : t.to(device, /*non_blocking=*/device.is_cuda());
  });
}

}  // namespace tenax::sdk
