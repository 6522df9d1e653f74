// The boundary between the C API and the C++ library: no exception crosses it.
//
// Every exported function is `return guarded("tenax_xxx", [&] { ... });`: the body throws the
// library's exceptions (or InvalidArgument / NotInitialized, the C API's own) and guarded()
// turns each into its tenax_status and the thread's last-error message, prefixed with the
// function's name, so a message reads "tenax_train_step: input: dtype 7 is not a tenax_dtype ...".
// Thread-safety: the last error is thread_local (tenax.h: "tenax_last_error() is per thread").
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "tenax.h"

namespace tenax::capi {

/// A caller's argument is wrong (NULL, dtype, shape, size, duplicate name): TENAX_ERR_INVALID_ARGUMENT.
/// The message starts with the argument's name ("input: ...").
class InvalidArgument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A handle that is not (or no longer) live: TENAX_ERR_NOT_INITIALIZED.
class NotInitialized : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// Maps the exception in flight to its status and records "<function>: <what>" as this thread's
/// last error. Call only from a catch block.
tenax_status status_of_current_exception(const char* function) noexcept;
/// Clears this thread's last error (a call that succeeds leaves "").
void clear_last_error() noexcept;

template <class F>
tenax_status guarded(const char* function, F&& body) noexcept {
  try {
    clear_last_error();
    std::forward<F>(body)();
    return TENAX_OK;
  } catch (...) {
    return status_of_current_exception(function);
  }
}

}  // namespace tenax::capi
