// The C API's status codes as C++ exceptions, for the example's own code: a simulation written
// in C++ calls the C API (tenax.h) like any other C library and turns a failed call into an
// exception that names the call, the status and tenax_last_error()'s message.
// Thread-safety: as the C API (one thread per context).
#pragma once

#include <stdexcept>
#include <string>

#include "tenax.h"

namespace sim {

class TenaxFailure : public std::runtime_error {
 public:
  TenaxFailure(tenax_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  tenax_status status() const { return status_; }

 private:
  tenax_status status_;
};

/// Throws TenaxFailure when `status` is not TENAX_OK; `call` names what was called.
inline void check(tenax_status status, const char* call) {
  if (status != TENAX_OK) {
    throw TenaxFailure(status,
                       std::string(call) + " failed (" + tenax_status_name(status) + "): " + tenax_last_error());
  }
}

}  // namespace sim
