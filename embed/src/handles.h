// What the C API's opaque handles hold.
//
// tenax_context owns this process's WorkerContext; a trainer borrows it (the context counts
// its trainers so that finalizing it under a live trainer is an error, not a dangling
// reference). tenax_model shares its model with the trainers built from it.
// Thread-safety: a handle is used by one thread (tenax.h: one thread per context).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "embedded_model.h"
#include "tenax/elastic/worker_context.h"
#include "tenax/sdk/trainer.h"
#include "tenax/sdk/training_arguments.h"
#include "tenax/sdk/user_state.h"

struct tenax_context {
  std::unique_ptr<tenax::elastic::WorkerContext> worker;
  int trainers = 0;  ///< live trainers borrowing `worker`
  /// The trainer that heals a lost peer in process (tenax_enable_in_process_recovery): the
  /// context's own collectives (tenax_allreduce, tenax_allgather) heal through it. Borrowed.
  tenax_trainer* recovering = nullptr;
};

struct tenax_model {
  std::shared_ptr<tenax::capi::EmbeddedModel> model;
};

struct tenax_trainer {
  tenax_context* context = nullptr;  ///< borrowed; outlives the trainer (see tenax_context::trainers)
  std::shared_ptr<tenax::capi::EmbeddedModel> model;
  tenax::sdk::TrainingArguments args;            ///< as the caller configured them
  bool batch_size_set = false;                   ///< the caller set per_device_train_batch_size: every step checks it
  tenax::sdk::UserState user_state;              ///< the caller's registered arrays; the Trainer borrows it
  std::set<std::string> state_names;             ///< registered in user_state (it has no lookup of its own)
  std::unique_ptr<tenax::sdk::Trainer> trainer;  ///< declared last: destroyed first
  bool begun = false;                            ///< Trainer::begin was called (restore or first step)
  bool begin_failed = false;                     ///< ... and threw: the trainer is unusable
  bool recovers_steps = false;                   ///< tenax_enable_in_process_recovery was called
  std::optional<std::int64_t> last_saved_step;   ///< saved or restored: the next save must be later
};

namespace tenax::capi {

/// Trainer::begin(resume) unless it was called: the first step, save or poll begins the run
/// without resuming; tenax_checkpoint_restore begins it with.
std::optional<std::int64_t> ensure_begun(tenax_trainer& trainer, bool resume);

}  // namespace tenax::capi
