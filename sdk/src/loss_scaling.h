// The two halves of a loss-scaled step (tenax/sdk/loss_scale.h), apart from the Trainer so that
// a table can test them: the gradients unscaled and checked, and the scale's next value.
#pragma once

#include <vector>

#include <torch/types.h>

#include "tenax/sdk/loss_scale.h"

namespace tenax::sdk::detail {

/// Divides every defined gradient of `params` by `scale` (a multiplication by its float32
/// reciprocal, as torch's _amp_foreach_non_finite_check_and_unscale_) and says whether any of
/// them holds an inf or a nan. After the allreduce every rank holds the same gradients, so every
/// rank gives the same answer.
bool unscale_gradients(const std::vector<torch::Tensor>& params, double scale);

/// The state after a step whose gradients were finite or not: torch's _amp_update_scale_ in
/// float32 arithmetic, plus the count of skipped steps.
LossScaleState next_loss_scale(const LossScaleState& state, bool found_inf, const GradScalerOptions& options);

}  // namespace tenax::sdk::detail
