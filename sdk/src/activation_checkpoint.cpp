#include "tenax/sdk/activation_checkpoint.h"

#include <algorithm>
#include <mutex>
#include <optional>
#include <utility>

#include <ATen/Context.h>
#include <torch/torch.h>

#include "tenax/sdk/autocast.h"
#include "tenax/sdk/state_capture.h"
#include "torch_compat.h"

namespace tenax::sdk {
namespace {

// The layer rides in the autograd context as a capsule: saved_data holds IValues only. Autograd
// takes defined tensors only, so the capsule also knows where the undefined inputs were.
struct LayerCapsule : torch::CustomClassHolder {
  LayerCapsule(CheckpointedLayer f, std::vector<bool> defined) : layer(std::move(f)), present(std::move(defined)) {}
  torch::Tensor operator()(at::TensorList defined) const {
    std::vector<torch::Tensor> inputs(present.size());
    std::size_t next = 0;
    for (std::size_t i = 0; i < present.size(); ++i) {
      if (present[i]) inputs[i] = defined[next++];
    }
    return layer(inputs);
  }
  CheckpointedLayer layer;
  std::vector<bool> present;
};

// The random state of the device the layer runs on (its dropout); the CPU's is always taken,
// since CPU code in a CUDA layer may draw from it too (torch's preserve_rng_state does the same).
torch::Tensor device_rng_state(const c10::Device& device) {
  auto gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state().clone();
}

void set_device_rng_state(const c10::Device& device, const torch::Tensor& state) {
  auto gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Sets the random streams to the first run's for the recompute, and back to where backward had
// them afterwards, so that the recompute draws what the forward drew and nothing after it shifts.
class ForkedRng {
 public:
  ForkedRng(const torch::Tensor& cpu, const std::optional<c10::Device>& cuda, const torch::Tensor& cuda_state)
      : cuda_(cuda), cpu_now_(capture_cpu_rng_state()) {
    if (cuda_) cuda_now_ = device_rng_state(*cuda_);
    restore_cpu_rng_state(cpu);
    if (cuda_) set_device_rng_state(*cuda_, cuda_state);
  }
  ~ForkedRng() {
    restore_cpu_rng_state(cpu_now_);
    if (cuda_) set_device_rng_state(*cuda_, cuda_now_);
  }
  ForkedRng(const ForkedRng&) = delete;
  ForkedRng& operator=(const ForkedRng&) = delete;

 private:
  std::optional<c10::Device> cuda_;
  torch::Tensor cpu_now_, cuda_now_;
};

struct Checkpoint : torch::autograd::Function<Checkpoint> {
  // Runs under no-grad (autograd's custom functions do): nothing inside is recorded.
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, c10::intrusive_ptr<LayerCapsule> capsule,
                               at::TensorList inputs) {
    c10::optional<c10::Device> cuda;
    for (const torch::Tensor& t : inputs) {
      if (t.is_cuda()) cuda = t.device();
    }
    ctx->saved_data["layer"] = c10::IValue::make_capsule(capsule);
    ctx->saved_data["cpu_rng"] = capture_cpu_rng_state();
    if (cuda) {
      ctx->saved_data["cuda_device"] = static_cast<int64_t>(cuda->index());
      ctx->saved_data["cuda_rng"] = device_rng_state(*cuda);
    }
    // The autocast of the first run, which backward no longer runs under.
    const c10::DeviceType type = cuda ? c10::kCUDA : c10::kCPU;
    ctx->saved_data["autocast"] = compat::autocast_enabled(type);
    ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(compat::autocast_dtype(type));
    c10::List<bool> needs_grad;
    for (const torch::Tensor& t : inputs) needs_grad.push_back(t.requires_grad());
    ctx->saved_data["needs_grad"] = needs_grad;
    ctx->save_for_backward(inputs.vec());
    return (*capsule)(inputs);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto layer = ctx->saved_data["layer"].toCapsule();
    const auto* capsule = static_cast<const LayerCapsule*>(layer.get());
    const c10::List<bool> needs_grad = ctx->saved_data["needs_grad"].toBoolList();
    std::vector<torch::Tensor> inputs = ctx->get_saved_variables();
    for (std::size_t i = 0; i < inputs.size(); ++i) inputs[i] = inputs[i].detach().requires_grad_(needs_grad[i]);

    std::optional<c10::Device> cuda;
    torch::Tensor cuda_state;
    if (ctx->saved_data.count("cuda_device") != 0) {
      cuda = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(ctx->saved_data["cuda_device"].toInt()));
      cuda_state = ctx->saved_data["cuda_rng"].toTensor();
    }
    torch::Tensor output;
    {
      ForkedRng rng(ctx->saved_data["cpu_rng"].toTensor(), cuda, cuda_state);
      torch::AutoGradMode grad(true);
      // The layer sees views, not the leaves themselves: autocast caches its casts of leaves that
      // require grad (the weights' cast once per region), and a cached cast of an input would sum
      // its gradients in the lower precision where the first run summed them in float32.
      std::vector<torch::Tensor> seen = inputs;
      for (std::size_t i = 0; i < seen.size(); ++i) {
        if (needs_grad[i]) seen[i] = inputs[i].view_as(inputs[i]);
      }
      AutocastGuard autocast(cuda ? c10::kCUDA : c10::kCPU, ctx->saved_data["autocast"].toBool(),
                             static_cast<c10::ScalarType>(ctx->saved_data["autocast_dtype"].toInt()));
      output = (*capsule)(seen);
    }
    // The parameters' gradients accumulate here, in a backward of its own (torch's reentrant
    // checkpoint); the inputs' are handed on to the outer backward.
    torch::autograd::backward({output}, {grad_outputs[0]});
    // Function<> expects one entry per forward argument: none for the capsule, then the inputs.
    torch::autograd::variable_list grads{torch::Tensor()};
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      grads.push_back(needs_grad[i] ? inputs[i].grad() : torch::Tensor());
    }
    return grads;
  }
};

}  // namespace

torch::Tensor checkpoint_activations(CheckpointedLayer layer, const std::vector<torch::Tensor>& inputs) {
  const bool records = torch::GradMode::is_enabled() &&
                       std::any_of(inputs.begin(), inputs.end(),
                                   [](const torch::Tensor& t) { return t.defined() && t.requires_grad(); });
  if (!records) return layer(inputs);
  std::vector<bool> present;
  std::vector<torch::Tensor> defined;
  for (const torch::Tensor& t : inputs) {
    present.push_back(t.defined());
    if (t.defined()) defined.push_back(t);
  }
  // A TensorList, not the vector: Function<> sees the tensors of a TensorList as its inputs.
  return Checkpoint::apply(c10::make_intrusive<LayerCapsule>(std::move(layer), std::move(present)),
                           at::TensorList(defined));
}

}  // namespace tenax::sdk
