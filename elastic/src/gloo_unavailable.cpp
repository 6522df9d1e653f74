// Built when TENAX_WITH_GLOO is OFF (the GPU build): only world size 1 works on CPU.
#include "tenax/core/error.h"
#include "tenax/elastic/gloo_communicator.h"

namespace tenax::elastic {

std::unique_ptr<Communicator> make_gloo_communicator(Store&, int rank, int size, const GlooOptions&) {
  if (size == 1 && rank == 0) return make_local_communicator();
  throw ConfigError("this Tenax build has no Gloo (TENAX_WITH_GLOO=OFF): a CPU world of size " +
                    std::to_string(size) + " needs it; rebuild with -DTENAX_WITH_GLOO=ON");
}

}  // namespace tenax::elastic
