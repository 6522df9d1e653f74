// The Trainer's AdamW: torch::optim::AdamW with a step() that updates each parameter in one
// pass over its memory instead of libtorch's ten tensor ops per parameter.
//
// Why: a profile of the MiniLM fine-tune (bench/results/profile-finetune-2026-11-24.txt) spent about a
// quarter of each step after backward, most of it in AdamW's per-parameter ops (mul_, add_,
// addcmul_, sqrt, div, add_, addcdiv_: ~23 full passes over the 91 MB of parameters and state,
// and ~2,000 op dispatches per step). transformers on torch 2.x uses torch's fused kernel
// (optim "adamw_torch_fused"); this is the same for Tenax:
//   - libtorch >= 2.4: at::_fused_adamw_, torch's own multi-tensor kernel (what
//     torch.optim.AdamW(fused=True) calls), one call per parameter group;
//   - older libtorch (Debian's 1.13, which has no CPU fused kernel): a loop in fused_adamw.cpp
//     that does the same arithmetic per element, vectorised and split over torch's threads.
// The state is libtorch's own (AdamWParamState: step, exp_avg, exp_avg_sq), so checkpoints,
// capture_optimizer_state / restore_optimizer_state and the resume logic see no difference. Results
// equal torch::optim::AdamW's to a few float32 rounding steps (the fused arithmetic rounds
// differently: fewer intermediate roundings), not bit for bit; a run is still bit-exactly
// reproducible against itself. Parameters the fused paths cannot take (amsgrad, sparse or
// non-contiguous gradients, a dtype or device a path does not handle) and a step() with a
// closure fall back to torch::optim::AdamW::step for the whole step.
// Thread-safety: as torch::optim::AdamW (one caller at a time).
#pragma once

#include <torch/optim/adamw.h>

namespace tenax::sdk::detail {

class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;

  /// Whether the last step() took a fused path (false: it fell back to libtorch's AdamW).
  bool last_step_fused() const { return last_step_fused_; }

 private:
  bool last_step_fused_ = false;
};

}  // namespace tenax::sdk::detail
