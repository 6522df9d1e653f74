#include "tenax/sdk/state_capture.h"

#include <mutex>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "tenax/core/error.h"
#include "torch_compat.h"

namespace tenax::sdk {

torch::Tensor capture_cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state().clone();
}

void restore_cpu_rng_state(const torch::Tensor& state) {
  if (!state.defined() || state.scalar_type() != torch::kUInt8 || state.dim() != 1) {
    throw StorageError("saved CPU RNG state is not a 1-D uint8 tensor");
  }
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state.contiguous());
  } catch (const c10::Error& e) {
    throw StorageError(std::string("saved CPU RNG state was rejected by libtorch: ") + e.what_without_backtrace());
  }
}

std::string cpu_rng_name(int rank) { return "rng/rank" + std::to_string(rank) + "/cpu"; }

std::string cuda_rng_name(int rank, int device) {
  return "rng/rank" + std::to_string(rank) + "/cuda" + std::to_string(device);
}

NamedTensors capture_rng_states(int rank) {
  NamedTensors out{{cpu_rng_name(rank), capture_cpu_rng_state()}};
  // defaultGenerator(kCUDA) goes through ATen's CUDA hooks, so this compiles against the CPU
  // libtorch too; device_count() is 0 there and on machines without a GPU.
  const int devices = static_cast<int>(torch::cuda::device_count());
  for (int d = 0; d < devices; ++d) {
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    out.emplace_back(cuda_rng_name(rank, d), gen.get_state().clone());
  }
  return out;
}

bool restore_rng_states(int rank, const std::function<torch::Tensor(const std::string&)>& lookup) {
  torch::Tensor cpu = lookup(cpu_rng_name(rank));
  if (!cpu.defined()) return false;
  restore_cpu_rng_state(cpu);
  const int devices = static_cast<int>(torch::cuda::device_count());
  for (int d = 0; d < devices; ++d) {
    torch::Tensor saved = lookup(cuda_rng_name(rank, d));
    if (!saved.defined()) continue;
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(d)));
    std::lock_guard<std::mutex> lock(gen.mutex());
    try {
      gen.set_state(saved.contiguous());
    } catch (const c10::Error& e) {
      throw StorageError("saved RNG state of CUDA device " + std::to_string(d) +
                         " was rejected by libtorch: " + e.what_without_backtrace());
    }
  }
  return true;
}

NamedTensors capture_adamw_state(torch::optim::AdamW& optimizer, const NamedTensors& named_params, Capture capture) {
  auto take = [capture](const torch::Tensor& t) { return capture == Capture::kCopy ? t.detach().clone() : t.detach(); };
  NamedTensors out;
  auto& state = optimizer.state();
  for (const auto& [name, param] : named_params) {
    auto it = state.find(compat::optimizer_state_key(param));
    if (it == state.end()) continue;
    auto& s = static_cast<torch::optim::AdamWParamState&>(*it->second);
    const std::string prefix = "optim/" + name + "/";
    out.emplace_back(prefix + "exp_avg", take(s.exp_avg()));
    out.emplace_back(prefix + "exp_avg_sq", take(s.exp_avg_sq()));
    out.emplace_back(prefix + "step", torch::tensor(s.step(), torch::kInt64));
    if (s.max_exp_avg_sq().defined() && s.max_exp_avg_sq().numel() > 0) {
      out.emplace_back(prefix + "max_exp_avg_sq", take(s.max_exp_avg_sq()));
    }
  }
  return out;
}

void restore_adamw_state(torch::optim::AdamW& optimizer, const NamedTensors& named_params,
                         const std::function<torch::Tensor(const std::string&)>& lookup) {
  auto& state = optimizer.state();
  state.clear();
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : named_params) {
    const std::string prefix = "optim/" + name + "/";
    torch::Tensor exp_avg = lookup(prefix + "exp_avg");
    if (!exp_avg.defined()) continue;
    torch::Tensor exp_avg_sq = lookup(prefix + "exp_avg_sq");
    torch::Tensor step = lookup(prefix + "step");
    if (!exp_avg_sq.defined() || !step.defined()) {
      throw StorageError("optimizer state of parameter '" + name + "' is incomplete in the checkpoint");
    }
    if (!exp_avg.sizes().equals(param.sizes()) || !exp_avg_sq.sizes().equals(param.sizes())) {
      throw StorageError("optimizer state of parameter '" + name + "' has shape " + c10::str(exp_avg.sizes()) +
                         ", the parameter has " + c10::str(param.sizes()));
    }
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(step.item<int64_t>());
    s->exp_avg(exp_avg.to(param.options()).contiguous());
    s->exp_avg_sq(exp_avg_sq.to(param.options()).contiguous());
    torch::Tensor max_sq = lookup(prefix + "max_exp_avg_sq");
    if (max_sq.defined()) s->max_exp_avg_sq(max_sq.to(param.options()).contiguous());
    state[compat::optimizer_state_key(param)] = std::move(s);
  }
}

}  // namespace tenax::sdk
