// Built when TENAX_WITH_GLOO is OFF, as in the CUDA flavour (CMakeLists.txt says why): only
// world size 1 works on CPU.
#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"

namespace tenax::elastic {

std::unique_ptr<Communicator> make_gloo_communicator(Store&, int rank, int size, const GlooOptions&) {
  if (size == 1 && rank == 0) return make_local_communicator();
  throw ConfigError(
      "this Tenax build has no Gloo (TENAX_WITH_GLOO=OFF; the CUDA flavour leaves it out because "
      "PyPI's libtorch carries its own Gloo): a CPU world of size " +
      std::to_string(size) +
      " needs it; run on GPUs with TENAX_BACKEND=nccl, or use the default build (`make build`) "
      "for CPU ranks");
}

}  // namespace tenax::elastic
