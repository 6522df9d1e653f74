// What a caller that drives training a step at a time (Trainer::step, the C API's
// tenax_train_step) gets when a peer was lost and the job healed in process instead of failing.
// Thread-safety: an exception is a value; safe to copy across threads.
//
//   try { trainer.step(batches); }
//   catch (const tenax::RecoveredError& e) { restart_from_registered_state(); }   // e.step()
#pragma once

#include <cstdint>
#include <string>

#include "tenax/core/error.h"

namespace tenax {

/// Not a failure of the job: a peer was lost during a collective call and the job healed in process
/// (DESIGN.md decision 13; Trainer::enable_step_recovery). The call did not complete. Every rank now
/// stands at optimizer step `step()`, the last one that completed, and its registered user state is
/// what it was when that step was called: the caller goes on from there. Derived from Error so that
/// a program that does not expect it stops rather than going on with state it did not look at.
class RecoveredError : public Error {
 public:
  RecoveredError(const std::string& message, std::int64_t step) : Error(message), step_(step) {}
  std::int64_t step() const { return step_; }

 private:
  std::int64_t step_;
};

}  // namespace tenax
