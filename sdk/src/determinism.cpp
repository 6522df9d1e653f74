#include "tenax/sdk/determinism.h"

#include <cstdlib>

#include <ATen/Context.h>

namespace tenax::sdk {

void enable_full_determinism() {
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

}  // namespace tenax::sdk
