// Built when TENAX_CUDA is OFF (the default CPU flavour): no NCCL, no CUDA device.
#include "tenax/core/error.h"
#include "tenax/elastic/nccl_communicator.h"

namespace tenax::elastic {

bool nccl_built() { return false; }

int visible_cuda_devices() { return 0; }

std::unique_ptr<Communicator> make_nccl_communicator(Store&, int rank, int size, const NcclOptions&) {
  throw ConfigError("TENAX_BACKEND=nccl for rank " + std::to_string(rank) + " of " + std::to_string(size) +
                    " but this Tenax build has no NCCL (the CPU flavour); build the CUDA flavour with "
                    "`make build-cuda`, or use TENAX_BACKEND=gloo");
}

}  // namespace tenax::elastic
