#include "error_boundary.h"

#include <c10/util/Exception.h>

#include "tenax/core/build_info.h"
#include "tenax/core/error.h"
#include "tenax/sdk/recovered_error.h"

namespace tenax::capi {
namespace {

thread_local std::string last_error;

// c10's messages end in a C++ stack trace (and "Exception raised from ..."): the first line is
// what a Fortran or C programmer can act on.
std::string without_backtrace(const c10::Error& e) {
  std::string message = e.what_without_backtrace();
  const auto cut = message.find("\nException raised from");
  if (cut != std::string::npos) message.resize(cut);
  return message;
}

void record(const char* function, const std::string& message) noexcept {
  try {
    last_error = std::string(function) + ": " + message;
  } catch (...) {  // out of memory while reporting: keep at least the function's name
    last_error = function;
  }
}

}  // namespace

void clear_last_error() noexcept { last_error.clear(); }

tenax_status status_of_current_exception(const char* function) noexcept {
  try {
    throw;
  } catch (const RecoveredError& e) {
    record(function, e.what());
    return TENAX_RECOVERED;
  } catch (const InvalidArgument& e) {
    record(function, e.what());
    return TENAX_ERR_INVALID_ARGUMENT;
  } catch (const NotInitialized& e) {
    record(function, e.what());
    return TENAX_ERR_NOT_INITIALIZED;
  } catch (const ConfigError& e) {
    record(function, e.what());
    return TENAX_ERR_CONFIG;
  } catch (const StorageError& e) {
    record(function, e.what());
    return TENAX_ERR_IO;
  } catch (const PeerLostError& e) {
    record(function, e.what());
    return TENAX_ERR_PEER;
  } catch (const TimeoutError& e) {
    record(function, e.what());
    return TENAX_ERR_PEER;
  } catch (const RendezvousError& e) {
    record(function, e.what());
    return TENAX_ERR_PEER;
  } catch (const c10::Error& e) {
    record(function, "libtorch: " + without_backtrace(e));
    return TENAX_ERR_INTERNAL;
  } catch (const std::exception& e) {
    record(function, e.what());
    return TENAX_ERR_INTERNAL;
  } catch (...) {
    record(function, "an unknown C++ exception (not a std::exception)");
    return TENAX_ERR_INTERNAL;
  }
}

}  // namespace tenax::capi

extern "C" {

const char* tenax_last_error(void) { return tenax::capi::last_error.c_str(); }

const char* tenax_version(void) { return tenax::version_line().c_str(); }

const char* tenax_status_name(int32_t status) {
  switch (status) {
    case TENAX_OK: return "TENAX_OK";
    case TENAX_ERR_INVALID_ARGUMENT: return "TENAX_ERR_INVALID_ARGUMENT";
    case TENAX_ERR_NOT_INITIALIZED: return "TENAX_ERR_NOT_INITIALIZED";
    case TENAX_ERR_CONFIG: return "TENAX_ERR_CONFIG";
    case TENAX_ERR_IO: return "TENAX_ERR_IO";
    case TENAX_ERR_PEER: return "TENAX_ERR_PEER";
    case TENAX_ERR_INTERNAL: return "TENAX_ERR_INTERNAL";
    case TENAX_RECOVERED: return "TENAX_RECOVERED";
  }
  return "TENAX_ERR_UNKNOWN";
}

}  // extern "C"
