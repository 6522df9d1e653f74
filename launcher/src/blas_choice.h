// Which OpenBLAS kernels the workers of `tenax run` get (tenax/core/blas_kernels.h says why it
// matters), decided once before the first worker starts, as a pure function of what the agent
// found: OpenBLAS's own choice on this CPU and the user's OPENBLAS_CORETYPE. The agent applies
// it by setting OPENBLAS_CORETYPE in the environment its workers inherit.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>

#include "tenax/core/blas_kernels.h"

namespace tenax::launcher {

struct BlasChoice {
  /// The OPENBLAS_CORETYPE to give the workers; nullopt: leave their environment as it is.
  std::optional<std::string> coretype;
  std::string message;  ///< one line for the agent's log
  bool warn = false;    ///< the workers keep kernels slower than the CPU's (the user chose them)
};

/// `probed`: the system's OpenBLAS as the agent's environment makes it choose (probe_openblas());
/// `user_coretype`: OPENBLAS_CORETYPE as the user set it (empty: not set).
BlasChoice choose_worker_blas(const std::optional<OpenBlasInfo>& probed, CpuVectorFeatures cpu,
                              const std::string& user_coretype);

/// The decision on this machine, from this process's OPENBLAS_CORETYPE (probes OpenBLAS).
BlasChoice choose_worker_blas_here();

}  // namespace tenax::launcher
