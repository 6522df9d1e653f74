// Simulation state and checkpoints: register, restore, save, wait, preemption.
#include <torch/torch.h>

#include "arrays.h"
#include "error_boundary.h"
#include "handles.h"
#include "live_handles.h"
#include "step_recovery.h"
#include "tenax/sdk/recovered_error.h"

using tenax::capi::guarded;
using tenax::capi::InvalidArgument;
using tenax::capi::live;
using tenax::capi::out_argument;

extern "C" {

tenax_status tenax_register_state(tenax_trainer* trainer, const char* name, const tenax_array* array, int32_t scope) {
  return guarded("tenax_register_state", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    if (name == nullptr) throw InvalidArgument("name: NULL string");
    const std::string key = name;
    // UserState's own rules (it would throw ConfigError), checked here so that the caller gets
    // an invalid-argument status naming `name`.
    if (key.empty() || key.find("..") != std::string::npos || key.front() == '/' || key.back() == '/') {
      throw InvalidArgument("name: '" + key + "' is not a state name (non-empty, no '..', no leading or trailing '/')");
    }
    if (t.state_names.count(key) != 0) {
      throw InvalidArgument("name: '" + key + "' is already registered (each state array is registered once)");
    }
    if (t.begun) {
      throw InvalidArgument("name: '" + key + "' registered after the first step or tenax_checkpoint_restore; " +
                            "register every state array before them");
    }
    if (scope != TENAX_REPLICATED && scope != TENAX_PER_RANK) {
      throw InvalidArgument("scope: " + std::to_string(scope) +
                            " is not a tenax_scope (TENAX_REPLICATED, TENAX_PER_RANK)");
    }
    const torch::Tensor tensor = tenax::capi::view_of(array, "array");
    // A view of the caller's memory: the checkpoint captures (copies) it at every save and a
    // restore copies into it, so the solver's array itself is what is saved and restored.
    t.user_state.add_tensor(
        key, tensor,
        scope == TENAX_PER_RANK ? tenax::sdk::UserState::Scope::kPerRank : tenax::sdk::UserState::Scope::kReplicated);
    t.state_names.insert(key);
  });
}

tenax_status tenax_checkpoint_restore(tenax_trainer* trainer, int64_t* step) {
  return guarded("tenax_checkpoint_restore", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    int64_t& out = out_argument(step, "step");
    out = -1;
    if (t.begun) {
      throw InvalidArgument(
          "trainer: tenax_checkpoint_restore after the first step, save or restore; "
          "call it once, before the first tenax_train_step");
    }
    std::optional<std::int64_t> label;
    try {
      label = tenax::capi::ensure_begun(t, /*resume=*/true);
    } catch (const tenax::RecoveredError& e) {
      out = e.step();  // a replacement healed from a peer: TENAX_RECOVERED, *step the optimizer step
      throw;
    }
    t.last_saved_step = label;
    out = label.value_or(-1);
  });
}

tenax_status tenax_checkpoint_save(tenax_trainer* trainer, int64_t step) {
  return guarded("tenax_checkpoint_save", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    if (step < 0) throw InvalidArgument("step: " + std::to_string(step) + " is negative");
    if (t.last_saved_step && step <= *t.last_saved_step) {
      throw InvalidArgument("step: " + std::to_string(step) + " is not after the last saved (or restored) step " +
                            std::to_string(*t.last_saved_step) + "; checkpoint steps must increase");
    }
    tenax::capi::ensure_begun(t, /*resume=*/false);
    tenax::capi::recovering(&t, [&] { t.trainer->save_checkpoint(step); });
    t.last_saved_step = step;
  });
}

tenax_status tenax_checkpoint_wait(tenax_trainer* trainer) {
  return guarded("tenax_checkpoint_wait", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    if (t.begun && !t.begin_failed) tenax::capi::recovering(&t, [&] { t.trainer->wait_for_checkpoint(); });
  });
}

tenax_status tenax_preemption_requested(tenax_trainer* trainer, int32_t* requested) {
  return guarded("tenax_preemption_requested", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    int32_t& out = out_argument(requested, "requested");
    out = 0;
    tenax::capi::ensure_begun(t, /*resume=*/false);  // begin() installs the signal handlers
    tenax::capi::recovering(&t, [&] { out = t.trainer->preemption_agreed(); });
  });
}

}  // extern "C"
