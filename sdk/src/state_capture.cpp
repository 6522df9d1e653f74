#include "tenax/sdk/state_capture.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include "tenax/core/error.h"
#include "tenax/sdk/adafactor.h"
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

namespace {

using Lookup = std::function<torch::Tensor(const std::string&)>;

torch::Tensor take(const torch::Tensor& t, Capture capture) {
  return capture == Capture::kCopy ? t.detach().clone() : t.detach();
}

// The saved tensor `key` of parameter `name`, on the parameter's device and dtype; throws
// StorageError when its shape is not `shape`.
torch::Tensor saved_as(const torch::Tensor& saved, const std::string& name, const std::string& key,
                       c10::IntArrayRef shape, const torch::Tensor& param) {
  if (!saved.sizes().equals(shape)) {
    throw StorageError("optimizer state '" + key + "' of parameter '" + name + "' has shape " +
                       c10::str(saved.sizes()) + " in the checkpoint, the optimizer needs " + c10::str(shape));
  }
  return saved.to(param.options()).contiguous();
}

std::unique_ptr<torch::optim::OptimizerParamState> restored_adamw(const std::string& name, const torch::Tensor& param,
                                                                  const Lookup& lookup) {
  const std::string prefix = "optim/" + name + "/";
  torch::Tensor exp_avg = lookup(prefix + "exp_avg");
  if (!exp_avg.defined()) return nullptr;
  torch::Tensor exp_avg_sq = lookup(prefix + "exp_avg_sq");
  torch::Tensor step = lookup(prefix + "step");
  if (!exp_avg_sq.defined() || !step.defined()) {
    throw StorageError("optimizer state of parameter '" + name + "' is incomplete in the checkpoint");
  }
  auto s = std::make_unique<torch::optim::AdamWParamState>();
  s->step(step.item<int64_t>());
  s->exp_avg(saved_as(exp_avg, name, "exp_avg", param.sizes(), param));
  s->exp_avg_sq(saved_as(exp_avg_sq, name, "exp_avg_sq", param.sizes(), param));
  torch::Tensor max_sq = lookup(prefix + "max_exp_avg_sq");
  if (max_sq.defined()) s->max_exp_avg_sq(saved_as(max_sq, name, "max_exp_avg_sq", param.sizes(), param));
  return s;
}

std::unique_ptr<torch::optim::OptimizerParamState> restored_sgd(const std::string& name, const torch::Tensor& param,
                                                                const Lookup& lookup) {
  torch::Tensor momentum = lookup("optim/" + name + "/momentum_buffer");
  if (!momentum.defined()) return nullptr;
  auto s = std::make_unique<torch::optim::SGDParamState>();
  s->momentum_buffer(saved_as(momentum, name, "momentum_buffer", param.sizes(), param));
  return s;
}

std::unique_ptr<torch::optim::OptimizerParamState> restored_adafactor(const std::string& name,
                                                                      const torch::Tensor& param,
                                                                      const Lookup& lookup) {
  const std::string prefix = "optim/" + name + "/";
  torch::Tensor step = lookup(prefix + "step");
  if (!step.defined()) return nullptr;
  auto s = std::make_unique<AdafactorParamState>();
  s->step(step.item<int64_t>());
  if (torch::Tensor exp_avg = lookup(prefix + "exp_avg"); exp_avg.defined()) {
    s->exp_avg(saved_as(exp_avg, name, "exp_avg", param.sizes(), param));
  }
  if (param.dim() >= 2) {  // factored, as Adafactor::step decides
    torch::Tensor row = lookup(prefix + "exp_avg_sq_row");
    torch::Tensor col = lookup(prefix + "exp_avg_sq_col");
    if (!row.defined() || !col.defined()) {
      throw StorageError(
          "Adafactor state of parameter '" + name +
          "' has no exp_avg_sq_row/exp_avg_sq_col in the checkpoint (was it saved by another optimizer?)");
    }
    std::vector<std::int64_t> col_shape(param.sizes().begin(), param.sizes().end() - 2);
    col_shape.push_back(param.size(-1));
    s->exp_avg_sq_row(saved_as(row, name, "exp_avg_sq_row", param.sizes().slice(0, param.dim() - 1), param));
    s->exp_avg_sq_col(saved_as(col, name, "exp_avg_sq_col", col_shape, param));
  } else {
    torch::Tensor sq = lookup(prefix + "exp_avg_sq");
    if (!sq.defined()) {
      throw StorageError("Adafactor state of parameter '" + name +
                         "' has no exp_avg_sq in the checkpoint (was it saved by another optimizer?)");
    }
    s->exp_avg_sq(saved_as(sq, name, "exp_avg_sq", param.sizes(), param));
  }
  return s;
}

}  // namespace

const char* checkpointable_optimizer_name(const torch::optim::Optimizer& optimizer) {
  if (dynamic_cast<const torch::optim::AdamW*>(&optimizer) != nullptr) return "AdamW";
  if (dynamic_cast<const torch::optim::SGD*>(&optimizer) != nullptr) return "SGD";
  if (dynamic_cast<const Adafactor*>(&optimizer) != nullptr) return "Adafactor";
  return nullptr;
}

NamedTensors capture_optimizer_state(torch::optim::Optimizer& optimizer, const NamedTensors& named_params,
                                     Capture capture) {
  NamedTensors out;
  auto& state = optimizer.state();
  for (const auto& [name, param] : named_params) {
    auto it = state.find(compat::optimizer_state_key(param));
    if (it == state.end()) continue;
    const std::string prefix = "optim/" + name + "/";
    const auto put = [&](const char* key, const torch::Tensor& t) {
      if (t.defined() && t.numel() > 0) out.emplace_back(prefix + key, take(t, capture));
    };
    if (const auto* a = dynamic_cast<const torch::optim::AdamWParamState*>(it->second.get())) {
      out.emplace_back(prefix + "exp_avg", take(a->exp_avg(), capture));
      out.emplace_back(prefix + "exp_avg_sq", take(a->exp_avg_sq(), capture));
      out.emplace_back(prefix + "step", torch::tensor(a->step(), torch::kInt64));
      put("max_exp_avg_sq", a->max_exp_avg_sq());
    } else if (const auto* g = dynamic_cast<const torch::optim::SGDParamState*>(it->second.get())) {
      put("momentum_buffer", g->momentum_buffer());
    } else if (const auto* f = dynamic_cast<const AdafactorParamState*>(it->second.get())) {
      out.emplace_back(prefix + "step", torch::tensor(f->step(), torch::kInt64));
      put("exp_avg", f->exp_avg());
      put("exp_avg_sq_row", f->exp_avg_sq_row());
      put("exp_avg_sq_col", f->exp_avg_sq_col());
      put("exp_avg_sq", f->exp_avg_sq());
    } else {
      throw ConfigError(std::string("the optimizer's state of parameter '") + name +
                        "' is not one Tenax can checkpoint: AdamW's, SGD's or Adafactor's");
    }
  }
  return out;
}

void restore_optimizer_state(torch::optim::Optimizer& optimizer, const NamedTensors& named_params,
                             const Lookup& lookup) {
  const char* const kind_name = checkpointable_optimizer_name(optimizer);
  if (kind_name == nullptr) {
    throw ConfigError("restore_optimizer_state: the optimizer is not one Tenax can checkpoint (AdamW, SGD, Adafactor)");
  }
  const std::string kind = kind_name;
  const auto restored = kind == "AdamW" ? restored_adamw : kind == "SGD" ? restored_sgd : restored_adafactor;
  auto& state = optimizer.state();
  state.clear();
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : named_params) {
    if (auto s = restored(name, param, lookup)) state[compat::optimizer_state_key(param)] = std::move(s);
  }
}

}  // namespace tenax::sdk
