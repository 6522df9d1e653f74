#include "fused_adamw.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <torch/torch.h>

#include "torch_compat.h"

// at::_fused_adamw_ has a CPU kernel from torch 2.4 on (CUDA before that).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TENAX_TORCH_FUSED_ADAMW 1
#else
#define TENAX_TORCH_FUSED_ADAMW 0
#endif

namespace tenax::sdk::detail {
namespace {

// One parameter's share of a step, after the state exists and its step count is advanced.
struct Update {
  torch::Tensor param, grad, exp_avg, exp_avg_sq;
  std::int64_t step;
};

#if !TENAX_TORCH_FUSED_ADAMW
// Per-step scalars, in float as ATen's float kernels apply their Scalar arguments.
struct Coefficients {
  float decay;  // 1 - lr * weight_decay
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float bias_correction2_sqrt;
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^step)
};

// libtorch's AdamW per element, in its order: p *= decay; m = m * b1 + (1 - b1) g;
// v = v * b2 + (1 - b2) g g; p += -step_size * m / (sqrt(v) / sqrt(bc2) + eps). Built for
// three x86 levels (GCC picks one at load time) and at -O3 -fno-math-errno (sdk/CMakeLists.txt)
// so that the loop, sqrt included, is vectorised: 4 loads and 3 stores per element instead of
// libtorch's 23 passes over memory.
// Not under a sanitizer: target_clones' resolver is an ifunc that the dynamic loader runs
// before the sanitizer's runtime is up, and its instrumented code crashes there (seen: the
// TSan build's sdk_test died in adamw_range's resolver before main).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
void adamw_range(float* __restrict p, const float* __restrict g, float* __restrict m, float* __restrict v,
                 std::int64_t n, Coefficients c) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * c.beta1 + c.one_minus_beta1 * gi;
    const float vi = v[i] * c.beta2 + c.one_minus_beta2 * (gi * gi);
    const float denom = std::sqrt(vi) / c.bias_correction2_sqrt + c.eps;
    p[i] = p[i] * c.decay + c.neg_step_size * (mi / denom);
    m[i] = mi;
    v[i] = vi;
  }
}

void adamw_one_pass(const Update& u, const torch::optim::AdamWOptions& o) {
  const auto [beta1, beta2] = o.betas();
  const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(u.step));
  const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(u.step));
  const Coefficients c{static_cast<float>(1 - o.lr() * o.weight_decay()),
                       static_cast<float>(beta1),
                       static_cast<float>(1 - beta1),
                       static_cast<float>(beta2),
                       static_cast<float>(1 - beta2),
                       static_cast<float>(std::sqrt(bias_correction2)),
                       static_cast<float>(o.eps()),
                       static_cast<float>(-o.lr() / bias_correction1)};
  float* p = u.param.data_ptr<float>();
  const float* g = u.grad.data_ptr<float>();
  float* m = u.exp_avg.data_ptr<float>();
  float* v = u.exp_avg_sq.data_ptr<float>();
  // Grain: ATen's own for elementwise kernels (at::internal::GRAIN_SIZE), so small tensors
  // stay on the calling thread as they do in libtorch's ops.
  at::parallel_for(0, u.param.numel(), 32768, [&](std::int64_t begin, std::int64_t end) {
    adamw_range(p + begin, g + begin, m + begin, v + begin, end - begin, c);
  });
}
#endif

// Whether a state tensor (a restored checkpoint's, say) is laid out as its parameter.
bool like(const torch::Tensor& t, const torch::Tensor& p) {
  return t.defined() && t.is_contiguous() && t.scalar_type() == p.scalar_type() && t.device() == p.device() &&
         t.sizes() == p.sizes();
}

// Whether every parameter with a gradient, and its state where it has one, can take this
// build's fused path (which reads all four as flat arrays of the parameter's dtype).
template <typename State>
bool fusable(const std::vector<torch::optim::OptimizerParamGroup>& groups, const State& state) {
  bool first = true;
  torch::Device device(torch::kCPU);
  for (const auto& group : groups) {
    if (static_cast<const torch::optim::AdamWOptions&>(group.options()).amsgrad()) return false;
    for (const auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      const auto& g = p.grad();
      if (g.is_sparse() || !p.is_contiguous() || !g.is_contiguous() || g.scalar_type() != p.scalar_type() ||
          g.device() != p.device() || p.scalar_type() != torch::kFloat32) {
        return false;
      }
      if (const auto it = state.find(compat::optimizer_state_key(p)); it != state.end()) {
        const auto& st = static_cast<const torch::optim::AdamWParamState&>(*it->second);
        if (!like(st.exp_avg(), p) || !like(st.exp_avg_sq(), p)) return false;
      }
      if (first) device = p.device();
      if (p.device() != device) return false;
      first = false;
#if !TENAX_TORCH_FUSED_ADAMW
      if (!p.device().is_cpu()) return false;
#endif
    }
  }
  return true;
}

}  // namespace

torch::Tensor FusedAdamW::step(LossClosure closure) {
  // A closure makes the gradients only inside step(), after the check below would have looked
  // at them; the Trainer passes none, so that case keeps libtorch's step.
  if (closure != nullptr || !fusable(param_groups(), state_)) {
    last_step_fused_ = false;
    return torch::optim::AdamW::step(std::move(closure));
  }
  last_step_fused_ = true;
  // Named in profiles (bench/profile_finetune.sh): the 1.x loop calls no aten op of its own.
  RECORD_FUNCTION("tenax::FusedAdamW::step", std::vector<c10::IValue>());
  torch::NoGradGuard no_grad;
  for (auto& group : param_groups()) {
    const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
    std::vector<Update> updates;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = state_[compat::optimizer_state_key(p)];
      if (slot == nullptr) {  // libtorch's initial state (AdamW::step)
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(0);
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamWParamState&>(*slot);
      s.step(s.step() + 1);
      updates.push_back({p, p.grad(), s.exp_avg(), s.exp_avg_sq(), s.step()});
    }
    if (updates.empty()) continue;
#if TENAX_TORCH_FUSED_ADAMW
    // One call per distinct step count (all parameters share it unless some had no gradient
    // in earlier steps); the kernel reads the step from a float tensor, as torch.optim passes it.
    std::map<std::int64_t, std::vector<const Update*>> by_step;
    for (const auto& u : updates) by_step[u.step].push_back(&u);
    const auto [beta1, beta2] = options.betas();
    for (const auto& [step, us] : by_step) {
      std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs, steps;
      const auto step_tensor = torch::full({}, static_cast<double>(step),
                                           torch::TensorOptions().dtype(torch::kFloat32).device(us[0]->param.device()));
      for (const Update* u : us) {
        params.push_back(u->param);
        grads.push_back(u->grad);
        exp_avgs.push_back(u->exp_avg);
        exp_avg_sqs.push_back(u->exp_avg_sq);
        steps.push_back(step_tensor);
      }
      at::_fused_adamw_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, options.lr(), beta1, beta2,
                        options.weight_decay(), options.eps(), /*amsgrad=*/false, /*maximize=*/false);
    }
#else
    for (const auto& u : updates) adamw_one_pass(u, options);
#endif
  }
  return {};
}

}  // namespace tenax::sdk::detail
