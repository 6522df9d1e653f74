#include "tenax/elastic/backend.h"

#include <algorithm>
#include <cctype>

#include "tenax/core/env.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/gloo_communicator.h"
#include "tenax/elastic/nccl_communicator.h"
#include "tenax/elastic/tcp_communicator.h"

namespace tenax::elastic {

Backend parse_backend(const std::string& text, const std::string& source) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "auto") return Backend::kAuto;
  if (lower == "gloo") return Backend::kGloo;
  if (lower == "tcp") return Backend::kTcp;
  if (lower == "nccl") return Backend::kNccl;
  if (lower == "mpi") return Backend::kMpi;
  throw ConfigError(source + "='" + text + "' is not a communicator backend; use auto, gloo, tcp, nccl or mpi");
}

Backend backend_from_env() {
  const auto value = env::get(kBackendVariable);
  if (!value || value->empty()) return Backend::kAuto;
  return parse_backend(*value);
}

const char* backend_name(Backend backend) {
  switch (backend) {
    case Backend::kAuto: return "auto";
    case Backend::kGloo: return "gloo";
    case Backend::kTcp: return "tcp";
    case Backend::kNccl: return "nccl";
    case Backend::kMpi: return "mpi";
  }
  return "unknown";
}

Backend resolve_backend(Backend requested, bool nccl_in_build, int visible_devices, bool gloo_in_build) {
  if (requested != Backend::kAuto) return requested;
  if (nccl_in_build && visible_devices > 0) return Backend::kNccl;
  return gloo_in_build ? Backend::kGloo : Backend::kTcp;
}

std::unique_ptr<Communicator> make_communicator(Backend backend, Store& store, int rank, int size,
                                                const CommunicatorOptions& options) {
  // Only ask CUDA for devices when the build has NCCL: the CPU flavour never touches CUDA.
  const Backend resolved =
      backend == Backend::kAuto
          ? resolve_backend(backend, nccl_built(), nccl_built() ? visible_cuda_devices() : 0, gloo_built())
          : backend;
  switch (resolved) {
    case Backend::kNccl: {
      NcclOptions nccl;
      nccl.timeout = options.timeout;
      return make_nccl_communicator(store, rank, size, nccl);
    }
    case Backend::kMpi:
      throw ConfigError(std::string(kBackendVariable) + "=mpi for rank " + std::to_string(rank) + " of " +
                        std::to_string(size) +
                        ": the MPI communicator is built from the program's own MPI "
                        "communicator (tenax_init_mpi or make_mpi_communicator under srun/mpirun), not from a "
                        "rendezvous store; under `tenax run` use TENAX_BACKEND=gloo, tcp or nccl");
    case Backend::kTcp: return make_tcp_communicator(store, rank, size, options);
    case Backend::kAuto:
    case Backend::kGloo: break;
  }
  GlooOptions gloo;
  gloo.hostname = options.hostname;
  gloo.timeout = options.timeout;
  gloo.abort = options.abort;
  return make_gloo_communicator(store, rank, size, gloo);
}

}  // namespace tenax::elastic
