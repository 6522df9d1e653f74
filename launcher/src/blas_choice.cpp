#include "blas_choice.h"

#include <cstdlib>

namespace tenax::launcher {

BlasChoice choose_worker_blas(const std::optional<OpenBlasInfo>& probed, CpuVectorFeatures cpu,
                              const std::string& user_coretype) {
  BlasChoice choice;
  if (!probed) {
    choice.message =
        "BLAS: the system's libblas.so.3 is not OpenBLAS; the workers' kernels are their libtorch's "
        "choice (CPU " +
        describe(cpu) + ")";
    return choice;
  }
  const std::string version = openblas_version(*probed);
  const std::optional<std::string> better = better_openblas_core(probed->core, cpu);
  if (!user_coretype.empty()) {
    choice.message = "BLAS: " + version + " with OPENBLAS_CORETYPE=" + user_coretype + " (yours) runs its " +
                     probed->core + " kernels; CPU " + describe(cpu);
    if (better) {
      // The user's word stands, but a choice that costs most of the speed is said loudly.
      choice.warn = true;
      choice.message +=
          ": slower kernels than this CPU can run; unset OPENBLAS_CORETYPE (tenax run then "
          "chooses) or set OPENBLAS_CORETYPE=" +
          *better;
    }
    return choice;
  }
  if (better) {
    choice.coretype = better;
    choice.message = "BLAS: " + version + " does not know this CPU (" + describe(cpu) + ") and falls back to its " +
                     probed->core + " kernels; the workers get OPENBLAS_CORETYPE=" + *better +
                     " (set OPENBLAS_CORETYPE yourself to choose otherwise)";
    return choice;
  }
  choice.message = "BLAS: " + version + ", core " + probed->core + "; CPU " + describe(cpu);
  return choice;
}

BlasChoice choose_worker_blas_here() {
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  return choose_worker_blas(probe_openblas(), detect_cpu_vector_features(), user ? user : "");
}

}  // namespace tenax::launcher
