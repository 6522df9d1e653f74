// Which Communicator a worker builds (DESIGN.md decision 1): Gloo on CPU, NCCL on GPU, chosen
// by TENAX_BACKEND=auto|gloo|nccl|mpi (auto when unset; `tenax run` passes it to its workers).
// auto means NCCL when this build has it (the CUDA flavour) and a CUDA device is visible, else
// Gloo. MPI is chosen by the program itself (make_mpi_communicator, tenax_init_mpi under
// srun/mpirun), never built from a rendezvous store: asking for it here is a ConfigError.
//
//   const Backend backend = resolve_backend(backend_from_env(), nccl_built(), visible_cuda_devices());
//   auto comm = make_communicator(backend, store, rank, world, {hostname, timeout});
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tenax/elastic/abort_signal.h"
#include "tenax/elastic/communicator.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {

enum class Backend { kAuto, kGloo, kNccl, kMpi };

inline constexpr const char* kBackendVariable = "TENAX_BACKEND";

/// "auto", "gloo", "nccl" or "mpi" (case-insensitive). ConfigError naming `source` otherwise.
Backend parse_backend(const std::string& text, const std::string& source = kBackendVariable);
/// TENAX_BACKEND, or kAuto when unset or empty.
Backend backend_from_env();
const char* backend_name(Backend backend);
/// Replaces kAuto by kNccl (NCCL in the build and a visible device) or kGloo; others unchanged.
Backend resolve_backend(Backend requested, bool nccl_in_build, int visible_devices);

struct CommunicatorOptions {
  /// Gloo: the address this rank binds to and advertises.
  std::string hostname = "127.0.0.1";
  /// Deadline for forming the communicator, and the default for calls that pass none.
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;
  /// Gloo: releases a connect or a call in flight when raised (gloo_communicator.h). Other
  /// backends ignore it: NCCL and MPI jobs do not recover in process.
  std::shared_ptr<AbortSignal> abort;
};

/// Builds the communicator of one generation over `store` (auto is resolved here). World size 1
/// on Gloo gives the local communicator. Throws what the backend's factory throws, and
/// ConfigError for kMpi.
std::unique_ptr<Communicator> make_communicator(Backend backend, Store& store, int rank, int size,
                                                const CommunicatorOptions& options);

}  // namespace tenax::elastic
