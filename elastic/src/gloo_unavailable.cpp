// Built when TENAX_WITH_GLOO is OFF, as in the CUDA flavour (CMakeLists.txt says why): CPU ranks
// use Tenax's TCP communicator there (TENAX_BACKEND=auto picks it).
#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"

namespace tenax::elastic {

bool gloo_built() { return false; }

std::unique_ptr<Communicator> make_gloo_communicator(Store&, int rank, int size, const GlooOptions&) {
  if (size == 1 && rank == 0) return make_local_communicator();
  throw ConfigError(
      "this Tenax build has no Gloo (TENAX_WITH_GLOO=OFF; the CUDA flavour leaves it out because "
      "PyPI's libtorch carries its own Gloo): a CPU world of size " +
      std::to_string(size) +
      " needs it; use TENAX_BACKEND=tcp (or auto) for CPU ranks, TENAX_BACKEND=nccl on GPUs, or the default "
      "build (`make build`) for Gloo");
}

}  // namespace tenax::elastic
