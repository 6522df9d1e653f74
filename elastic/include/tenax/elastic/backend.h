// Which Communicator a worker builds (DESIGN.md decisions 1 and 15): Gloo or Tenax's TCP ring on
// CPU, NCCL on GPU, chosen by TENAX_BACKEND=auto|gloo|tcp|nccl|mpi (auto when unset; `tenax run`
// passes it to its workers). auto means NCCL when this build has it (the CUDA flavour) and a
// CUDA device is visible; else Gloo where the build has it (the default build), the TCP ring
// where it does not (the build on PyPI's torch). MPI is chosen by the program itself
// (make_mpi_communicator, tenax_init_mpi under srun/mpirun), never built from a rendezvous
// store: asking for it here is a ConfigError.
//
//   const Backend backend = resolve_backend(backend_from_env(), nccl_built(), visible_cuda_devices(), gloo_built());
//   auto comm = make_communicator(backend, store, rank, world, {hostname, timeout});
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "tenax/elastic/abort_signal.h"
#include "tenax/elastic/communicator.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {

enum class Backend { kAuto, kGloo, kTcp, kNccl, kMpi };

inline constexpr const char* kBackendVariable = "TENAX_BACKEND";

/// "auto", "gloo", "tcp", "nccl" or "mpi" (case-insensitive). ConfigError naming `source` otherwise.
Backend parse_backend(const std::string& text, const std::string& source = kBackendVariable);
/// TENAX_BACKEND, or kAuto when unset or empty.
Backend backend_from_env();
const char* backend_name(Backend backend);
/// Replaces kAuto by kNccl (NCCL in the build and a visible device), else kGloo (Gloo in the
/// build) or kTcp; others unchanged.
Backend resolve_backend(Backend requested, bool nccl_in_build, int visible_devices, bool gloo_in_build);

struct CommunicatorOptions {
  /// Gloo and TCP: the address this rank binds to and advertises.
  std::string hostname = "127.0.0.1";
  /// Deadline for forming the communicator, and the default for calls that pass none.
  std::chrono::milliseconds timeout = kDefaultCollectiveTimeout;
  /// Gloo and TCP: releases a connect or a call in flight when raised (gloo_communicator.h).
  /// NCCL and MPI ignore it: their jobs do not recover in process.
  std::shared_ptr<AbortSignal> abort;
};

/// Builds the communicator of one generation over `store` (auto is resolved here). World size 1
/// on Gloo gives the local communicator. Throws what the backend's factory throws, and
/// ConfigError for kMpi.
std::unique_ptr<Communicator> make_communicator(Backend backend, Store& store, int rank, int size,
                                                const CommunicatorOptions& options);

}  // namespace tenax::elastic
