// Which handles are live, so that a handle used after its free is an error, not a crash.
//
// tenax.h promises "a handle used after it was freed is TENAX_ERR_NOT_INITIALIZED". The free
// functions set the caller's pointer to NULL, but a C or Fortran program often keeps a copy of
// it; dereferencing that copy would read freed memory. So every handle is recorded here when
// created and forgotten when freed, and a handle is dereferenced only after it is found here.
// (An address reused by a later allocation of the same type is then that new, live handle.)
// Thread-safety: all functions are safe to call concurrently.
#pragma once

#include <string>

#include "error_boundary.h"

namespace tenax::capi {

void remember_handle(const void* handle);
void forget_handle(const void* handle);
bool is_live_handle(const void* handle);

/// `handle` itself, checked: NULL is InvalidArgument, freed is NotInitialized; both name
/// `argument` and the handle's `type` ("tenax_trainer").
template <class T>
T& live(T* handle, const char* argument, const char* type) {
  if (handle == nullptr) throw InvalidArgument(std::string(argument) + ": NULL " + type + " handle");
  if (!is_live_handle(handle)) {
    throw NotInitialized(std::string(argument) + ": not a live " + type + " (freed already, or not made by libtenax)");
  }
  return *handle;
}

/// An output pointer argument (tenax_model** model, int32_t* rank): NULL is InvalidArgument.
template <class T>
T& out_argument(T* pointer, const char* argument) {
  if (pointer == nullptr) throw InvalidArgument(std::string(argument) + ": NULL pointer (where the result goes)");
  return *pointer;
}

}  // namespace tenax::capi
